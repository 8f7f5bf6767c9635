// A transactional producer for the tests: the Python client cannot produce in transactions.
// Run with Java's single-file launcher on the broker's jars:
//   java -cp "<broker lib>/*" TxnProducer.java <serviceUrl> [<topic>]
// Reads one command per line on stdin and answers one line "ok [messageId]" (or "err ...") each:
//   topic <topic> | plain <payload> | begin | send <payload> | commit | abort
// "topic" moves the producer to another topic (a transaction, the client's, may stay open across it): one JVM
// serves a whole test session, whose starts (the launcher compiles this file each time) cost seconds each.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.transaction.Transaction;

public class TxnProducer {
    public static void main(String[] args) throws Exception {
        PulsarClient client = PulsarClient.builder().serviceUrl(args[0]).enableTransaction(true).build();
        Producer<byte[]> producer = args.length > 1 ? producer(client, args[1]) : null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Transaction txn = null;
        System.out.println("ok ready");
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.split(" ", 2);
            try {
                switch (cmd[0]) {
                    case "topic" -> {
                        if (producer != null) {
                            producer.close();
                        }
                        producer = producer(client, cmd[1]);
                        answer(null);
                    }
                    case "plain" -> answer(producer.newMessage().value(bytes(cmd[1])).send());
                    case "begin" -> {
                        txn = client.newTransaction().withTransactionTimeout(10, TimeUnit.MINUTES).build().get();
                        answer(null);
                    }
                    case "send" -> answer(producer.newMessage(txn).value(bytes(cmd[1])).send());
                    case "commit" -> { txn.commit().get(); txn = null; answer(null); }
                    case "abort" -> { txn.abort().get(); txn = null; answer(null); }
                    default -> System.out.println("err unknown command " + cmd[0]);
                }
            } catch (Exception e) {
                System.out.println("err " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        if (producer != null) {
            producer.close();
        }
        client.close();
    }

    private static Producer<byte[]> producer(PulsarClient client, String topic) throws Exception {
        // Transactions need sendTimeout 0; no batching, so every message is an entry of its own.
        return client.newProducer().topic(topic).sendTimeout(0, TimeUnit.SECONDS).enableBatching(false).create();
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static void answer(MessageId id) {
        System.out.println(id == null ? "ok" : "ok " + id);
    }
}
