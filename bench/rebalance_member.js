// One kafkajs consumer-group member for bench.rebalance_delay, in a node process of its own.
//
//     NODE_PATH=<dir holding kafkajs> node bench/rebalance_member.js BOOTSTRAP GROUP TOPIC
//
// Same contract as bench/rebalance_member.py: prints "ready" once kafkajs is loaded, starts on the
// first line of standard input, prints "assigned <unix time> <partitions>" for every GROUP_JOIN
// (kafkajs' assignment event), and disconnects (LeaveGroup) when standard input says "stop" or closes.
// kafkajs' own log lines go to standard output too; the bench reads only the lines above.
"use strict";

const readline = require("readline");
const { Kafka } = require("kafkajs");

const [bootstrap, group, topic] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin });
let started = false;
let consumer = null;

async function start() {
  const kafka = new Kafka({ clientId: "rebalance-delay", brokers: [bootstrap] });
  consumer = kafka.consumer({ groupId: group });
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
    console.log(`assigned ${(Date.now() / 1000).toFixed(6)} ${parts.join(",")}`);
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic] });
  await consumer.run({ eachMessage: async () => {} });
}

async function stop() {
  if (consumer !== null) {
    await consumer.disconnect().catch(() => {});
  }
  process.exit(0);
}

lines.on("line", (line) => {
  if (!started) {
    started = true;
    start().catch((err) => {
      console.error(err);
      process.exit(1);
    });
  } else if (line.trim() === "stop") {
    stop();
  }
});
lines.on("close", stop);
console.log("ready");
