// A producer with Java's typed schemas for the tests: the Python client only has STRING, BYTES,
// AVRO and JSON, and cannot write a binary key or a KeyValue. Run with Java's single-file
// launcher on the broker's jars:
//   java -cp "<broker lib>/*" SchemaProducer.java <serviceUrl>
// Reads one tab-separated command per line on stdin and answers one line "ok" (or "err ...") each:
//   send <topic> <schema> <key> <value>   queued (batched, as producers in the field send)
//   flush                                 every queued message sent and acknowledged
// <key>: "none", "str:<text>" (key(text), "" included) or "hex:<bytes in hex>" (keyBytes).
// <value>: "null" (value(null), a tombstone) or "v:<text>", read as <schema> says:
//   bytes, int8, int16, int32, int64, float, double, boolean: the literal (bytes: UTF-8 text);
//   date, time, timestamp: epoch milliseconds; instant, local_date, local_time, local_date_time: ISO-8601;
//   kv_int_string (INLINE), kv_string_avro (SEPARATED), kv_avro_json (INLINE): "<key>|<value>", where a
//   record is "<sensor>,<reading>" and either side may be "null".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.TypedMessageBuilder;
import org.apache.pulsar.common.schema.KeyValue;
import org.apache.pulsar.common.schema.KeyValueEncodingType;

public class SchemaProducer {
    public static class Reading {
        public String sensor;
        public double reading;

        public Reading() {}

        Reading(String text) {
            String[] parts = text.split(",", 2);
            sensor = parts[0];
            reading = Double.parseDouble(parts[1]);
        }
    }

    static Schema<?> schema(String name) {
        return switch (name) {
            case "bytes" -> Schema.BYTES;
            case "int8" -> Schema.INT8;
            case "int16" -> Schema.INT16;
            case "int32" -> Schema.INT32;
            case "int64" -> Schema.INT64;
            case "float" -> Schema.FLOAT;
            case "double" -> Schema.DOUBLE;
            case "boolean" -> Schema.BOOL;
            case "date" -> Schema.DATE;
            case "time" -> Schema.TIME;
            case "timestamp" -> Schema.TIMESTAMP;
            case "instant" -> Schema.INSTANT;
            case "local_date" -> Schema.LOCAL_DATE;
            case "local_time" -> Schema.LOCAL_TIME;
            case "local_date_time" -> Schema.LOCAL_DATE_TIME;
            case "kv_int_string" -> Schema.KeyValue(Schema.INT32, Schema.STRING, KeyValueEncodingType.INLINE);
            case "kv_string_avro" -> Schema.KeyValue(Schema.STRING, Schema.AVRO(Reading.class), KeyValueEncodingType.SEPARATED);
            case "kv_avro_json" -> Schema.KeyValue(Schema.AVRO(Reading.class), Schema.JSON(Reading.class), KeyValueEncodingType.INLINE);
            default -> throw new IllegalArgumentException("unknown schema " + name);
        };
    }

    static Object value(String schema, String text) {
        return switch (schema) {
            case "bytes" -> text.getBytes(StandardCharsets.UTF_8);
            case "int8" -> Byte.parseByte(text);
            case "int16" -> Short.parseShort(text);
            case "int32" -> Integer.parseInt(text);
            case "int64" -> Long.parseLong(text);
            case "float" -> Float.parseFloat(text);
            case "double" -> Double.parseDouble(text);
            case "boolean" -> Boolean.parseBoolean(text);
            case "date" -> new java.util.Date(Long.parseLong(text));
            case "time" -> new java.sql.Time(Long.parseLong(text));
            case "timestamp" -> new java.sql.Timestamp(Long.parseLong(text));
            case "instant" -> Instant.parse(text);
            case "local_date" -> LocalDate.parse(text);
            case "local_time" -> LocalTime.parse(text);
            case "local_date_time" -> LocalDateTime.parse(text);
            default -> {
                String[] kv = text.split("\\|", 2);
                String[] sides = schema.substring(3).split("_");
                yield new KeyValue<>(side(sides[0], kv[0]), side(sides[1], kv[1]));
            }
        };
    }

    static Object side(String kind, String text) {
        if (text.equals("null")) {
            return null;
        }
        return switch (kind) {
            case "int" -> Integer.parseInt(text);
            case "string" -> text;
            default -> new Reading(text);  // avro, json
        };
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    public static void main(String[] args) throws Exception {
        PulsarClient client = PulsarClient.builder().serviceUrl(args[0]).build();
        Map<String, Producer> producers = new HashMap<>();
        List<CompletableFuture<?>> pending = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("ok ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] cmd = line.split("\t", -1);
            try {
                if (cmd[0].equals("flush")) {
                    for (Producer p : producers.values()) {
                        p.flush();
                    }
                    CompletableFuture.allOf(pending.toArray(new CompletableFuture[0])).get();
                    pending.clear();
                } else if (cmd[0].equals("send")) {
                    String topic = cmd[1], schema = cmd[2], key = cmd[3], value = cmd[4];
                    Producer p = producers.get(topic);
                    if (p == null) {
                        p = client.newProducer(schema(schema)).topic(topic).create();
                        producers.put(topic, p);
                    }
                    TypedMessageBuilder m = p.newMessage();
                    if (key.startsWith("str:")) {
                        m = m.key(key.substring(4));
                    } else if (key.startsWith("hex:")) {
                        m = m.keyBytes(HexFormat.of().parseHex(key.substring(4)));
                    }
                    m = m.value(value.equals("null") ? null : value(schema, value.substring(2)));
                    pending.add(m.sendAsync());
                } else {
                    throw new IllegalArgumentException("unknown command " + cmd[0]);
                }
                System.out.println("ok");
            } catch (Exception e) {
                System.out.println("err " + e.toString().replace('\n', ' '));
            }
            System.out.flush();
        }
        for (Producer p : producers.values()) {
            p.close();
        }
        client.close();
    }
}
