// sarama 1.22 (Debian's golang-github-shopify-sarama-dev) against a broker, as an old Go service runs it:
//
//  1. a producer at sarama's own default Version (0.8.2: Metadata v0, Produce v0, message format v0)
//     sends plain messages and one gzip-compressed message set;
//  2. a partition consumer at the default Version reads them back (ListOffsets v0, Fetch v0);
//  3. a consumer group reads them (sarama's ConsumerGroup needs Version >= 0.10.2, its lowest:
//     FindCoordinator v0, JoinGroup v1, SyncGroup v0, Heartbeat v0, OffsetFetch v1, Fetch v3,
//     OffsetCommit v1, LeaveGroup v0) and commits;
//  4. an offset manager at the default Version reads the committed offset back (OffsetFetch v1).
//
// It prints one JSON line per event. Usage: sarama_produce_consume <host:port> <topic> <group>
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

var out = json.NewEncoder(os.Stdout)

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func emit(kind string, fields map[string]interface{}) {
	fields["event"] = kind
	out.Encode(fields)
}

func msgFields(via string, m *sarama.ConsumerMessage) map[string]interface{} {
	return map[string]interface{}{
		"via": via, "offset": m.Offset, "key": string(m.Key), "value": string(m.Value),
		"time_ms": m.Timestamp.UnixNano() / 1e6, "zero_time": m.Timestamp.IsZero(),
	}
}

const total = 6

type handler struct {
	mu   sync.Mutex
	seen int
	done chan struct{}
}

func (h *handler) Setup(s sarama.ConsumerGroupSession) error {
	emit("group_setup", map[string]interface{}{"generation": s.GenerationID(), "claims": s.Claims()})
	return nil
}

func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		emit("message", msgFields("group", m))
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.seen++
		if h.seen == total {
			close(h.done)
		}
		h.mu.Unlock()
	}
	return nil
}

func main() {
	addrs, topic, group := []string{os.Args[1]}, os.Args[2], os.Args[3]

	// 1. produce at the default Version
	cfg := sarama.NewConfig()
	cfg.ClientID = "sarama-default-version"
	cfg.Producer.Return.Successes = true
	emit("config", map[string]interface{}{"default_version": cfg.Version.String()})
	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		fail("producer", err)
	}
	for i := 0; i < 3; i++ {
		_, offset, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("plain-%d", i)),
		})
		if err != nil {
			fail("send", err)
		}
		emit("produced", map[string]interface{}{"offset": offset})
	}
	producer.Close()

	gzcfg := sarama.NewConfig()
	gzcfg.ClientID = "sarama-default-version-gzip"
	gzcfg.Producer.Return.Successes = true
	gzcfg.Producer.Compression = sarama.CompressionGZIP
	gzproducer, err := sarama.NewSyncProducer(addrs, gzcfg)
	if err != nil {
		fail("gzip producer", err)
	}
	var batch []*sarama.ProducerMessage
	for i := 3; i < total; i++ {
		batch = append(batch, &sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("gzip-%d", i)),
		})
	}
	if err := gzproducer.SendMessages(batch); err != nil {
		fail("send gzip", err)
	}
	for _, m := range batch {
		emit("produced", map[string]interface{}{"offset": m.Offset, "compression": "gzip"})
	}
	gzproducer.Close()

	// 2. a partition consumer at the default Version
	consumer, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		fail("consumer", err)
	}
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		fail("consume partition", err)
	}
	timeout := time.After(15 * time.Second)
	for i := 0; i < total; i++ {
		select {
		case m := <-pc.Messages():
			emit("message", msgFields("partition_consumer", m))
		case err := <-pc.Errors():
			fail("partition consumer", err)
		case <-timeout:
			fail("partition consumer", fmt.Errorf("timed out after %d messages", i))
		}
	}
	pc.Close()
	consumer.Close()

	// 3. a consumer group at the lowest Version sarama's ConsumerGroup accepts
	gcfg := sarama.NewConfig()
	gcfg.ClientID = "sarama-group-0.10.2"
	gcfg.Version = sarama.V0_10_2_0
	gcfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	gcfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup(addrs, group, gcfg)
	if err != nil {
		fail("consumer group", err)
	}
	go func() {
		for err := range cg.Errors() {
			emit("group_error", map[string]interface{}{"error": err.Error()})
		}
	}()
	h := &handler{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		fail("consumer group", fmt.Errorf("timed out"))
	}
	cancel()
	if err := <-consumed; err != nil {
		fail("consume", err)
	}
	if err := cg.Close(); err != nil { // commits the marked offsets, then LeaveGroup
		fail("close group", err)
	}

	// 4. the committed offset, read back at the default Version
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		fail("client", err)
	}
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		fail("offset manager", err)
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		fail("manage partition", err)
	}
	next, _ := pom.NextOffset()
	emit("committed", map[string]interface{}{"offset": next})
	newest, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		fail("get offset", err)
	}
	emit("end_offset", map[string]interface{}{"offset": newest})
	pom.Close()
	om.Close()
	client.Close()
}
