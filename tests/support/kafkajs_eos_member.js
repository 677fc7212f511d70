// tests.support.eos_member's contract with kafkajs, in a node process of its own:
//
//     NODE_PATH=<dir holding kafkajs> node tests/support/kafkajs_eos_member.js BOOTSTRAP GROUP INPUT OUTPUT TXN_ID
//
// Each transaction takes up to 200 records of one fetched batch (read_committed, kafkajs' default),
// writes them to OUTPUT prefixed "out:", sends the next offset to the transaction (sendOffsets: kafkajs
// 2.2 sends TxnOffsetCommit by group id, without the member's generation) and commits. Prints "open"
// once a transaction's records are acknowledged and "committed <total>" after each commit. Any failure ends the process
// (exit 2) after an abort attempt: its supervisor starts it again, as with a fenced producer.
//
// After each commit it waits until the committed offset reads back: kafkajs fetches committed offsets
// without KIP-447's require_stable, so from a commit until the coordinator has written the transaction's
// markers it reads the previous offset (as from Kafka); a rebalance in that window made the member
// process its last committed chunk again. kafkajs rejoins only between batches or from heartbeat(),
// so waiting here, before both, closes the window.
const { Kafka, logLevel } = require('kafkajs')

const PAUSE_MS = parseInt(process.env.EOS_PAUSE_MS || '30', 10)
const CHUNK = 200

async function main () {
  const [bootstrap, groupId, source, sink, transactionalId] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: transactionalId, brokers: [bootstrap], logLevel: process.env.EOS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING })
  const producer = kafka.producer({ transactionalId, maxInFlightRequests: 1, idempotent: true, transactionTimeout: 4000 })
  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 1000 })
  const admin = kafka.admin()
  await producer.connect()
  await consumer.connect()
  await admin.connect()
  const readBack = async (topic, partition, offset) => {
    const deadline = Date.now() + 30000
    while (Date.now() < deadline) {
      try {
        const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
        const p = t.partitions.find((x) => x.partition === partition)
        if (p && BigInt(p.offset) >= BigInt(offset)) return
      } catch (e) {} // the daemon restarting: ask again
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  await consumer.subscribe({ topic: source, fromBeginning: true })
  let total = 0
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      for (let i = 0; i < batch.messages.length; i += CHUNK) {
        const chunk = batch.messages.slice(i, i + CHUNK)
        const last = chunk[chunk.length - 1]
        const txn = await producer.transaction()
        try {
          await txn.send({
            topic: sink,
            messages: chunk.map((m) => ({ key: m.key, value: Buffer.concat([Buffer.from('out:'), m.value]) }))
          })
          console.log('open')
          await new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
          const next = (BigInt(last.offset) + 1n).toString()
          await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] })
          await txn.commit()
        } catch (e) {
          console.log(`failed ${e}`)
          await txn.abort().catch(() => {})
          process.exit(2)
        }
        resolveOffset(last.offset)
        total += chunk.length
        console.log(`committed ${total}`)
        await readBack(batch.topic, batch.partition, (BigInt(last.offset) + 1n).toString())
        await heartbeat()
      }
    }
  })
}

main().catch((e) => {
  console.log(`error ${e && e.stack ? e.stack : e}`)
  process.exit(2)
})
