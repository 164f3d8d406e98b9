// The real Java clients of Kafka 3.9.2 for tools/kafka/legacy_fixtures.py: they create the topics
// and produce the records that a Kafka 3.9 broker in ZooKeeper mode (inter.broker.protocol.version
// 2.8) writes as genuine v0/v1 messages. Compiled by the generator with javac against
// .tools/kafka/3.9.2/lib; public API only.
//
//   java -cp 'lib/*:classes' LegacyProducer BOOTSTRAP TOPICS_FILE RECORDS_FILE
//
// TOPICS_FILE lines: "topic<TAB>partitions<TAB>k=v,k=v" (replication factor 1); waits until every
// partition has a leader. RECORDS_FILE lines: "topic<TAB>partition<TAB>codec<TAB>timestamp|-<TAB>
// key|-<TAB>value|-" (key and value base64, "-" for null), or "#flush": every producer is flushed,
// so the records before it and after it never share a produce batch. One producer per codec
// (compression.type), idempotence off (v0/v1 cannot carry producer ids), one request in flight.
// Prints "topic<TAB>partition<TAB>offset<TAB>timestamp" per record, in the order of RECORDS_FILE.
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

public class LegacyProducer {
    static byte[] unb64(String s) {
        return s.equals("-") ? null : Base64.getDecoder().decode(s);
    }

    static void createTopics(String bootstrap, Path spec) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (String line : Files.readAllLines(spec, StandardCharsets.UTF_8)) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t", -1);
            Map<String, String> cfg = new HashMap<>();
            if (f.length > 2 && !f[2].isEmpty())
                for (String kv : f[2].split(",")) {
                    int i = kv.indexOf('=');
                    cfg.put(kv.substring(0, i), kv.substring(i + 1));
                }
            topics.add(new NewTopic(f[0], Integer.parseInt(f[1]), (short) 1).configs(cfg));
            names.add(f[0]);
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin a = Admin.create(p)) {
            a.createTopics(topics).all().get();
            long deadline = System.currentTimeMillis() + 90_000;
            while (true) {
                String missing = null;
                try {
                    for (TopicDescription td : a.describeTopics(names).allTopicNames().get().values())
                        for (TopicPartitionInfo pi : td.partitions())
                            if (pi.leader() == null || pi.leader().isEmpty()) missing = td.name() + "-" + pi.partition();
                } catch (Exception e) {
                    missing = e.toString();
                }
                if (missing == null) break;
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no leader for " + missing);
                Thread.sleep(100);
            }
        }
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String codec) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "1");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "1000");  // batches end at batch.size or at a #flush
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1500");
        return new KafkaProducer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        createTopics(bootstrap, Path.of(args[1]));
        Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try {
            for (String line : Files.readAllLines(Path.of(args[2]), StandardCharsets.UTF_8)) {
                if (line.isBlank()) continue;
                if (line.equals("#flush")) {
                    for (KafkaProducer<byte[], byte[]> p : producers.values()) p.flush();
                    continue;
                }
                String[] f = line.split("\t", -1);
                KafkaProducer<byte[], byte[]> p = producers.computeIfAbsent(f[2], c -> producer(bootstrap, c));
                Long ts = f[3].equals("-") ? null : Long.parseLong(f[3]);
                sent.add(p.send(new ProducerRecord<>(f[0], Integer.parseInt(f[1]), ts, unb64(f[4]), unb64(f[5]))));
            }
            for (KafkaProducer<byte[], byte[]> p : producers.values()) p.flush();
            StringBuilder out = new StringBuilder();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata m = f.get();
                out.append(m.topic()).append('\t').append(m.partition()).append('\t').append(m.offset()).append('\t')
                        .append(m.timestamp()).append('\n');
            }
            System.out.print(out);
        } finally {
            for (KafkaProducer<byte[], byte[]> p : producers.values()) p.close();
        }
    }
}
