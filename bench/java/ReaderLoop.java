// The Java client's reader over the same entries, touching every field the source's columns carry
// (id, payload, key, ordering key, properties, publish and event time, producer): what a read path
// with no Python object per message could approach (issue 17: the native path's ceiling).
// Usage: java -cp '<broker lib>/*' ReaderLoop.java <serviceUrl> <topic> <messages> <rounds>
// Prints one line per round: "rate <messages per second>".
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;

public class ReaderLoop {
    public static void main(String[] args) throws Exception {
        String serviceUrl = args[0], topic = args[1];
        long messages = Long.parseLong(args[2]);
        int rounds = Integer.parseInt(args[3]);
        try (PulsarClient client = PulsarClient.builder().serviceUrl(serviceUrl).build()) {
            for (int round = 0; round < rounds; round++) {
                try (Reader<byte[]> reader = client.newReader().topic(topic).startMessageId(MessageId.earliest).create()) {
                    long count = 0, sink = 0;
                    long t0 = System.nanoTime();
                    while (count < messages) {
                        Message<byte[]> msg = reader.readNext(30, TimeUnit.SECONDS);
                        if (msg == null) {
                            throw new IllegalStateException("no message within 30 s after " + count);
                        }
                        sink += msg.getMessageId().toByteArray().length + msg.getData().length + msg.getPublishTime()
                                + msg.getEventTime() + msg.getProperties().size() + msg.getProducerName().length()
                                + (msg.hasKey() ? msg.getKey().length() : 0) + (msg.hasOrderingKey() ? 1 : 0);
                        count++;
                    }
                    double seconds = (System.nanoTime() - t0) / 1e9;
                    System.out.println("rate " + (long) (count / seconds) + " " + sink);
                }
            }
        }
    }
}
