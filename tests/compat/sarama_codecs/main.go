// sarama 1.22 producing snappy and lz4 message sets and reading them back down-converted:
// snappy at sarama's default Version (0.8.2: Produce v0, message format v0) read back by a consumer
// at that Version (Fetch v0: magic 0), then lz4 at 0.10.0 (the lowest Version sarama allows it at:
// Produce v2, message format v1) and a consumer at 0.10.0 (Fetch v2: magic 1) reads everything;
// then another topic is deleted with DeleteTopics v0.
// One JSON line per event. Usage: sarama_codecs <host:port> <topic> <topic to delete>
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/Shopify/sarama"
)

var out = json.NewEncoder(os.Stdout)

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func produce(addrs []string, topic string, version sarama.KafkaVersion, codec sarama.CompressionCodec, name string) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sarama-" + name
	cfg.Version = version
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = codec
	p, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		fail(name+" producer", err)
	}
	var batch []*sarama.ProducerMessage
	for i := 0; i < 3; i++ {
		// Repetitive values, so that lz4 and snappy really compress (matches, not only literals).
		value := fmt.Sprintf("%s-%d-%s", name, i, strings.Repeat("abcd", 40))
		batch = append(batch, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(name), Value: sarama.StringEncoder(value)})
	}
	if err := p.SendMessages(batch); err != nil {
		fail(name+" send", err)
	}
	for _, m := range batch {
		out.Encode(map[string]interface{}{"event": "produced", "codec": name, "offset": m.Offset})
	}
	p.Close()
}

func consume(addrs []string, topic string, version sarama.KafkaVersion, label string, n int) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "sarama-consumer-" + label
	cfg.Version = version
	c, err := sarama.NewConsumer(addrs, cfg)
	if err != nil {
		fail("consumer", err)
	}
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		fail("consume partition", err)
	}
	timeout := time.After(15 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case m := <-pc.Messages():
			out.Encode(map[string]interface{}{
				"event": "message", "via": label, "offset": m.Offset, "key": string(m.Key), "value": string(m.Value),
			})
		case err := <-pc.Errors():
			fail("consumer "+label, err)
		case <-timeout:
			fail("consumer "+label, fmt.Errorf("timed out after %d messages", i))
		}
	}
	pc.Close()
	c.Close()
}

func main() {
	addrs, topic, doomed := []string{os.Args[1]}, os.Args[2], os.Args[3]
	produce(addrs, topic, sarama.MinVersion, sarama.CompressionSnappy, "snappy")
	// Before the lz4 messages exist: a magic 0 lz4 message carries Kafka's broken frame checksum
	// (KAFKA-3160), which sarama's lz4 reader refuses, from groupd as from Kafka 3.x.
	consume(addrs, topic, sarama.MinVersion, "fetch_v0", 3)
	produce(addrs, topic, sarama.V0_10_0_0, sarama.CompressionLZ4, "lz4")
	consume(addrs, topic, sarama.V0_10_0_0, "fetch_v2", 6)

	// DeleteTopics v0 of another topic (sarama's own request at Version 0, through the leader).
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V0_10_1_0 // sarama's own floor for DeleteTopics (it sends v0 there)
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		fail("client", err)
	}
	broker, err := client.Leader(topic, 0)
	if err != nil {
		fail("leader", err)
	}
	resp, err := broker.DeleteTopics(&sarama.DeleteTopicsRequest{Version: 0, Topics: []string{doomed}, Timeout: 10 * time.Second})
	if err != nil {
		fail("delete topics", err)
	}
	out.Encode(map[string]interface{}{"event": "deleted", "error": int(resp.TopicErrorCodes[doomed])})
	client.Close()
}
