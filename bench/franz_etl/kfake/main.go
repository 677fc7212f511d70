// franz-go's kfake (a fake Kafka cluster whose brokers are one process, as groupd's cluster mode is)
// with N brokers, for bench/cluster_group.py's peer reference (issue 29, item 4): prints the first
// broker's address, counts the requests it is sent by API key, and prints the counts as one JSON
// line on stderr when it gets SIGTERM or SIGINT.
//
//	kfake-ref BROKERS
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(n))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var counts [128]int64
	// Looks at every request and leaves it to the cluster (false: not handled here).
	c.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if k := r.Key(); k >= 0 && int(k) < len(counts) {
			atomic.AddInt64(&counts[k], 1)
		}
		return nil, nil, false
	})
	fmt.Println(c.ListenAddrs()[0])
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	out := map[string]int64{}
	for k := range counts {
		if v := atomic.LoadInt64(&counts[k]); v > 0 {
			out[strconv.Itoa(k)] = v
		}
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(os.Stderr, string(b))
}
