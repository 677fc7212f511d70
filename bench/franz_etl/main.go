// The shape of franz-go's TestGroupETL, written for bench/cluster_group.py (issue 29, item 4) against
// franz-go v1.16 (the newest that builds with Go 1.19; no KIP-848): records produced to a
// 20-partition topic go through a chain of three consumer groups whose members join and leave;
// subtests (balancers, static membership) run concurrently; prints the seconds as JSON lines.
//
//	franz-etl BOOTSTRAP RECORDS PREFIX SUBTESTS   (SUBTESTS: range,cooperative-sticky[/static],... | none)
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	produced atomic.Bool
	seeds    []string
	limit    uint64
)

type consumer struct {
	from, to, group string
	balancer        kgo.GroupBalancer
	static          bool
	consumed        uint64
	n               int64
	wg              sync.WaitGroup
}

func (c *consumer) goRun(etlsBeforeQuit int) { c.wg.Add(1); go c.etl(etlsBeforeQuit) }

func (c *consumer) etl(etlsBeforeQuit int) {
	defer c.wg.Done()
	idx := int(atomic.AddInt64(&c.n, 1))
	netls := 0
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.UnknownTopicRetries(-1),
		kgo.SessionTimeout(20 * time.Second),
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(c.from),
		kgo.Balancers(c.balancer),
		kgo.MaxBufferedRecords(10000),
		kgo.MaxBufferedBytes(50000),
		kgo.ConsumePreferringLagFn(kgo.PreferLagAt(1)),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if etlsBeforeQuit >= 0 && netls >= etlsBeforeQuit {
				return
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				fmt.Fprintln(os.Stderr, "commit in revoked:", err)
			}
		}),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) {}),
	}
	if c.static {
		opts = append(opts, kgo.InstanceID(fmt.Sprintf("static-%s-%d", c.group, atomic.AddInt64(&c.n, 1))))
	}
	if os.Getenv("KGO_DEBUG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000 ") + c.group + "#" + strconv.Itoa(idx) + " " })))
	}
	cl, _ := kgo.NewClient(opts...)
	defer cl.Close()
	defer func() {
		defer cl.LeaveGroup()
		cl.Flush(context.Background())
	}()
	defer cl.AllowRebalance()
	for {
		cl.AllowRebalance()
		if etlsBeforeQuit > 0 {
			if err := cl.CommitUncommittedOffsets(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "commit:", err)
			}
		}
		// one poll per AllowRebalance: franz-go before v1.18 deadlocks polling again while a
		// rebalance waits (fixed upstream; the newer test polls 4 times)
		for i := 0; i < 1; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			fetches := cl.PollRecords(ctx, 25)
			cancel()
			if err := fetches.Err(); err == context.DeadlineExceeded || err == context.Canceled || err == kgo.ErrClientClosed {
				if atomic.LoadUint64(&c.consumed) >= limit {
					return
				}
				continue
			}
			if errs := fetches.Errors(); len(errs) > 0 {
				fmt.Fprintln(os.Stderr, "poll errors:", errs)
				return
			}
			if etlsBeforeQuit >= 0 && netls >= etlsBeforeQuit {
				return
			}
			fetches.EachRecord(func(r *kgo.Record) {
				atomic.AddUint64(&c.consumed, 1)
				cl.Produce(context.Background(), &kgo.Record{Topic: c.to, Key: r.Key, Value: r.Value}, nil)
			})
		}
		netls++
	}
}

func createTopics(names ...string) {
	admin, _ := kgo.NewClient(kgo.SeedBrokers(seeds...))
	defer admin.Close()
	req := kmsg.NewCreateTopicsRequest()
	for _, n := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = n
		t.NumPartitions = 20
		t.ReplicationFactor = 1
		req.Topics = append(req.Topics, t)
	}
	if _, err := req.RequestWith(context.Background(), admin); err != nil {
		panic(err)
	}
}

func chain(topic1, name string, bal kgo.GroupBalancer, static bool) {
	start := time.Now()
	createTopics(name+"-t2", name+"-t3", name+"-t4")
	var cs [3]*consumer
	topics := []string{topic1, name + "-t2", name + "-t3", name + "-t4"}
	for i := range cs {
		cs[i] = &consumer{from: topics[i], to: topics[i+1], group: fmt.Sprintf("%s-g%d", name, i+1), balancer: bal, static: static}
	}
	for i := 0; i < 3; i++ {
		cs[0].goRun(-1)
		cs[1].goRun(-1)
		cs[2].goRun(-1)
	}
	cs[0].goRun(0)
	cs[0].goRun(2)
	cs[1].goRun(2)
	time.Sleep(5 * time.Second)
	for i := 0; i < 3; i++ {
		cs[0].goRun(-1)
		cs[1].goRun(-1)
		cs[2].goRun(-1)
	}
	cs[1].goRun(0)
	cs[0].goRun(1)
	for _, c := range cs {
		c.wg.Wait()
	}
	fmt.Printf("{\"subtest\": %q, \"seconds\": %.2f, \"consumed\": [%d, %d, %d]}\n", name, time.Since(start).Seconds(), cs[0].consumed, cs[1].consumed, cs[2].consumed)
}

func main() {
	seeds = []string{os.Args[1]}
	limit, _ = strconv.ParseUint(os.Args[2], 10, 64)
	prefix := os.Args[3]
	subtests := strings.Split(os.Args[4], ",")
	if os.Args[4] == "none" {
		subtests = nil
	}
	topic1 := prefix + "-t1"
	createTopics(topic1)
	start := time.Now()
	body := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	go func() {
		cl, _ := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.UnknownTopicRetries(-1), kgo.MaxBufferedRecords(10000), kgo.MaxBufferedBytes(50000))
		defer cl.Close()
		for i := uint64(0); i < limit; i++ {
			cl.Produce(context.Background(), &kgo.Record{Topic: topic1, Key: []byte(strconv.FormatUint(i, 10)), Value: body}, nil)
		}
		cl.Flush(context.Background())
		fmt.Fprintf(os.Stderr, "produced %d in %.2fs\n", limit, time.Since(start).Seconds())
		produced.Store(true)
	}()
	var wg sync.WaitGroup
	for _, st := range subtests {
		var bal kgo.GroupBalancer
		static := strings.HasSuffix(st, "/static")
		switch strings.TrimSuffix(st, "/static") {
		case "range":
			bal = kgo.RangeBalancer()
		case "sticky":
			bal = kgo.StickyBalancer()
		default:
			bal = kgo.CooperativeStickyBalancer()
		}
		wg.Add(1)
		go func(name string, bal kgo.GroupBalancer, static bool) {
			defer wg.Done()
			chain(topic1, name, bal, static)
		}(prefix+"-"+strings.ReplaceAll(st, "/", "-"), bal, static)
	}
	wg.Wait()
	for subtests == nil && !produced.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("{\"total_seconds\": %.2f}\n", time.Since(start).Seconds())
}
