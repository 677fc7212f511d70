// kafka-go 0.2 (Debian's golang-github-segmentio-kafka-go-dev) against a broker: it creates the topic
// (CreateTopics v0), writes plain and gzip messages (Produce v2, message format v1), reads them back
// from offset 0 (Fetch v2) and prints one JSON line per message, then deletes the topic (DeleteTopics v1).
// Usage: kafkago_v2 <host:port> <topic>
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/gzip"
)

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func main() {
	addr, topic := os.Args[1], os.Args[2]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ctl, err := kafka.DialContext(ctx, "tcp", addr)
	if err != nil {
		fail("dial", err)
	}
	if err := ctl.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		fail("create topics", err)
	}

	conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, 0)
	if err != nil {
		fail("dial leader", err)
	}
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	stamp := time.Unix(1700000000, 0)
	if _, err := conn.WriteMessages(
		kafka.Message{Key: []byte("k0"), Value: []byte("plain-0"), Time: stamp},
		kafka.Message{Key: []byte("k1"), Value: []byte("plain-1"), Time: stamp.Add(time.Second)},
	); err != nil {
		fail("write plain", err)
	}
	if _, err := conn.WriteCompressedMessages(gzip.NewCompressionCodec(),
		kafka.Message{Key: []byte("k2"), Value: []byte("gzip-2"), Time: stamp.Add(2 * time.Second)},
		kafka.Message{Key: []byte("k3"), Value: []byte("gzip-3"), Time: stamp.Add(3 * time.Second)},
		kafka.Message{Key: nil, Value: []byte("gzip-4"), Time: stamp.Add(4 * time.Second)},
	); err != nil {
		fail("write gzip", err)
	}
	if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
		fail("seek", err)
	}
	out := json.NewEncoder(os.Stdout)
	read := 0
	for read < 5 {
		batch := conn.ReadBatch(1, 1<<20)
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			read++
			out.Encode(map[string]interface{}{
				"offset": m.Offset, "key": string(m.Key), "null_key": m.Key == nil, "value": string(m.Value),
				"time_ms": m.Time.UnixNano() / 1e6, "high_watermark": batch.HighWaterMark(),
			})
		}
		if err := batch.Close(); err != nil {
			fail("read batch", err)
		}
	}
	conn.Close()
	if err := ctl.DeleteTopics(topic); err != nil {
		fail("delete topics", err)
	}
	ctl.Close()
}
