// A consumer-lag monitor in the way Burrow 1.2 is one, on sarama 1.22 configured for Kafka 2.0.0:
// it consumes the internal __consumer_offsets topic (Fetch v4) and decodes its records as Burrow's
// kafka_client module does -- offset commits (key v0/v1, value v0/v1/v3) and group metadata (key v2;
// values above v2 are reported as undecodable, as Burrow warns about them with real Kafka) -- and
// reads the end offsets of the group's partitions with ListOffsets v1 (Version 2.0.0) and v0
// (sarama's default Version), then prints the lag. One JSON line per event.
// Usage: sarama_lag_monitor <host:port> <group> <topic> <partitions>
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

var out = json.NewEncoder(os.Stdout)
var outMu sync.Mutex

func emit(kind string, fields map[string]interface{}) {
	fields["event"] = kind
	outMu.Lock()
	out.Encode(fields)
	outMu.Unlock()
}

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func readString(buf *bytes.Buffer) (string, error) {
	var n int16
	if err := binary.Read(buf, binary.BigEndian, &n); err != nil {
		return "", err
	}
	if n < 0 {
		return "", nil
	}
	b := buf.Next(int(n))
	if len(b) != int(n) {
		return "", errors.New("short string")
	}
	return string(b), nil
}

type commit struct {
	group, topic string
	partition    int32
	offset       int64
}

// decode follows Burrow's core/internal/consumer/kafka_client.go processConsumerOffsetsMessage.
func decode(m *sarama.ConsumerMessage) (*commit, map[string]interface{}) {
	key := bytes.NewBuffer(m.Key)
	var keyVersion int16
	if err := binary.Read(key, binary.BigEndian, &keyVersion); err != nil {
		return nil, map[string]interface{}{"warning": "key too short"}
	}
	switch keyVersion {
	case 0, 1:
		group, err1 := readString(key)
		topic, err2 := readString(key)
		var partition int32
		err3 := binary.Read(key, binary.BigEndian, &partition)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, map[string]interface{}{"warning": "bad offset key"}
		}
		if m.Value == nil {
			return nil, map[string]interface{}{"kind": "offset_tombstone", "group": group, "topic": topic}
		}
		value := bytes.NewBuffer(m.Value)
		var valueVersion int16
		binary.Read(value, binary.BigEndian, &valueVersion)
		var offset int64
		switch valueVersion {
		case 0, 1, 3:
			if err := binary.Read(value, binary.BigEndian, &offset); err != nil {
				return nil, map[string]interface{}{"warning": "bad offset value"}
			}
		default:
			return nil, map[string]interface{}{"warning": "unknown offset value version", "value_version": valueVersion}
		}
		return &commit{group, topic, partition, offset}, map[string]interface{}{
			"kind": "offset_commit", "key_version": keyVersion, "value_version": valueVersion,
			"group": group, "topic": topic, "partition": partition, "offset": offset,
		}
	case 2:
		group, _ := readString(key)
		if m.Value == nil {
			return nil, map[string]interface{}{"kind": "group_tombstone", "group": group}
		}
		var valueVersion int16
		binary.Read(bytes.NewBuffer(m.Value), binary.BigEndian, &valueVersion)
		fields := map[string]interface{}{"kind": "group_metadata", "group": group, "value_version": valueVersion}
		if valueVersion > 2 {
			fields["warning"] = "failed to decode: unknown group metadata value version"
		}
		return nil, fields
	}
	return nil, map[string]interface{}{"warning": "unknown key version", "key_version": keyVersion}
}

func main() {
	addrs, group, topic := []string{os.Args[1]}, os.Args[2], os.Args[3]
	partitions, _ := strconv.Atoi(os.Args[4])

	cfg := sarama.NewConfig()
	cfg.ClientID = "lag-monitor"
	cfg.Version = sarama.V2_0_0_0
	cfg.Consumer.Return.Errors = true
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		fail("client", err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		fail("consumer", err)
	}
	offsetsPartitions, err := client.Partitions("__consumer_offsets")
	if err != nil {
		fail("partitions of __consumer_offsets", err)
	}
	emit("offsets_topic", map[string]interface{}{"partitions": len(offsetsPartitions)})

	// Read every __consumer_offsets partition up to its end offset (as Burrow's start-up does).
	committed := map[int32]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range offsetsPartitions {
		end, err := client.GetOffset("__consumer_offsets", p, sarama.OffsetNewest)
		if err != nil {
			fail("end of __consumer_offsets", err)
		}
		if end == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition("__consumer_offsets", p, sarama.OffsetOldest)
		if err != nil {
			fail("consume __consumer_offsets", err)
		}
		wg.Add(1)
		go func(p int32, end int64, pc sarama.PartitionConsumer) {
			defer wg.Done()
			defer pc.Close()
			timeout := time.After(15 * time.Second)
			for {
				select {
				case m := <-pc.Messages():
					c, fields := decode(m)
					fields["offsets_partition"] = p
					if c != nil && c.group == group && c.topic == topic {
						mu.Lock()
						committed[c.partition] = c.offset
						mu.Unlock()
					}
					if fields["group"] == group {
						emit("record", fields)
					}
					if m.Offset+1 >= end {
						return
					}
				case err := <-pc.Errors():
					fail("consume __consumer_offsets", err)
				case <-timeout:
					fail("consume __consumer_offsets", fmt.Errorf("partition %d: timed out before offset %d", p, end))
				}
			}
		}(p, end, pc)
	}
	wg.Wait()

	old := sarama.NewConfig() // sarama's default Version: ListOffsets v0
	old.ClientID = "lag-monitor-v0"
	oldClient, err := sarama.NewClient(addrs, old)
	if err != nil {
		fail("default-version client", err)
	}
	defer oldClient.Close()
	for p := int32(0); p < int32(partitions); p++ {
		endV1, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			fail("ListOffsets v1", err)
		}
		endV0, err := oldClient.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			fail("ListOffsets v0", err)
		}
		startV0, err := oldClient.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			fail("ListOffsets v0 oldest", err)
		}
		c, ok := committed[p]
		lag := int64(-1)
		if ok {
			lag = endV1 - c
		}
		emit("lag", map[string]interface{}{
			"partition": p, "end_v1": endV1, "end_v0": endV0, "start_v0": startV0, "committed": c, "has_commit": ok, "lag": lag,
		})
	}
}
