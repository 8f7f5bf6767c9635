// A Java producer with the client's default settings (default router and hashing), for the sink's test that keys
// land where a Java producer puts them. Run on the broker's jars (tests/java_producer.py):
//   java -cp "<broker lib>/*" KeyProducer <serviceUrl> <topic>
// Reads one key per line on stdin (UTF-8), sends a message with that key and the key as its payload, answers "ok"
// (or "err ...") each.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;

public class KeyProducer {
    public static void main(String[] args) throws Exception {
        PulsarClient client = PulsarClient.builder().serviceUrl(args[0]).build();
        Producer<byte[]> producer = client.newProducer().topic(args[1]).create();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ok ready");
        String key;
        while ((key = in.readLine()) != null) {
            try {
                producer.newMessage().key(key).value(key.getBytes(StandardCharsets.UTF_8)).send();
                System.out.println("ok");
            } catch (Exception e) {
                System.out.println("err " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        producer.close();
        client.close();
    }
}
