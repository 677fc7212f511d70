// A kafkajs transactional producer, in a node process of its own (tests/e2e/test_transactions_e2e.py).
//
//     NODE_PATH=<dir holding kafkajs> node tests/support/kafkajs_txn.js BOOTSTRAP TXN_ID TOPIC SOURCE GROUP
//
// Three transactions on TOPIC: "kept0".."kept4" committed, "dropped0".."dropped4" aborted (each send
// is acknowledged, so they are in the log before the abort), "kept5".."kept9" committed together with
// offset 7 of SOURCE partition 0 for GROUP (sendOffsets: AddOffsetsToTxn + TxnOffsetCommit). Prints
// "done" and exits 0, or prints the error and exits 1.
const { Kafka, logLevel } = require('kafkajs')

async function main () {
  const [bootstrap, transactionalId, topic, source, group] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: 'kafkajs-txn', brokers: [bootstrap], logLevel: logLevel.ERROR })
  const producer = kafka.producer({ transactionalId, maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  const values = (prefix, from) => Array.from({ length: 5 }, (_, i) => ({ value: `${prefix}${from + i}` }))
  let txn = await producer.transaction()
  await txn.send({ topic, messages: values('kept', 0) })
  await txn.commit()
  txn = await producer.transaction()
  await txn.send({ topic, messages: values('dropped', 0) })
  await txn.abort()
  txn = await producer.transaction()
  await txn.send({ topic, messages: values('kept', 5) })
  await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: source, partitions: [{ partition: 0, offset: '7' }] }] })
  await txn.commit()
  await producer.disconnect()
  console.log('done')
}

main().catch((e) => {
  console.log(`error ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
