// The real Java clients of the Kafka version under test, for tests/support/kafka.py.
// Compiled once per version at test time (javac against the version's lib/), public API only.
//
//   create  BOOTSTRAP SPEC_FILE      SPEC_FILE lines: "topic<TAB>partitions<TAB>k=v,k=v"; creates
//                                    them (replication factor 1), waits until every partition has
//                                    a leader, prints "created N"
//   leaders BOOTSTRAP TOPIC...       waits until every partition of the topics has a leader
//   consume BOOTSTRAP TOPIC...       reads every partition from the beginning to its end offset
//                                    with the KafkaConsumer (no group, CRCs checked), one line per
//                                    record: topic, partition, offset, timestamp, timestamp type,
//                                    key, value, headers; binary fields base64, "-" for null
//   seek    BOOTSTRAP SPEC_FILE      SPEC_FILE lines "topic<TAB>partition<TAB>offset": for each, seeks
//                                    there and prints "topic<TAB>partition<TAB>offset<TAB>first"
//                                    with the offset of the first record the broker serves ("-"
//                                    when nothing is at or after it); exercises the offset index
//   times   BOOTSTRAP SPEC_FILE      SPEC_FILE lines "topic<TAB>partition<TAB>timestamp": the
//                                    consumer's offsetsForTimes, one line "topic<TAB>partition<TAB>
//                                    timestamp<TAB>offset<TAB>record timestamp" ("-" for none)
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

public class RealKafkaClient {
    static final long DEADLINE_MS = 90_000;

    static String b64(byte[] b) {
        return b == null ? "-" : Base64.getEncoder().encodeToString(b);
    }

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    static void awaitLeaders(Admin a, List<String> topics) throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
            String missing = null;
            try {
                Map<String, TopicDescription> d = a.describeTopics(topics).allTopicNames().get();
                for (TopicDescription td : d.values())
                    for (TopicPartitionInfo pi : td.partitions())
                        if (pi.leader() == null || pi.leader().isEmpty())
                            missing = td.name() + "-" + pi.partition();
            } catch (Exception e) {
                missing = e.toString();
            }
            if (missing == null) return;
            if (System.currentTimeMillis() > deadline)
                throw new IllegalStateException("no leader for " + missing);
            Thread.sleep(100);
        }
    }

    static void create(String bootstrap, Path spec) throws Exception {
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
        try (Admin a = admin(bootstrap)) {
            a.createTopics(topics).all().get();
            awaitLeaders(a, names);
        }
        System.out.println("created " + topics.size());
    }

    static void leaders(String bootstrap, List<String> topics) throws Exception {
        try (Admin a = admin(bootstrap)) {
            awaitLeaders(a, topics);
        }
        System.out.println("leaders " + topics.size());
    }

    static void consume(String bootstrap, List<String> topics) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : topics)
                for (PartitionInfo pi : c.partitionsFor(t, Duration.ofSeconds(60)))
                    tps.add(new TopicPartition(t, pi.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(60));
            Set<TopicPartition> pending = new HashSet<>(tps);
            pending.removeIf(tp -> c.position(tp) >= end.get(tp));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (!pending.isEmpty()) {
                if (System.currentTimeMillis() > deadline)
                    throw new IllegalStateException("timed out; not at the end offset: " + pending);
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    StringBuilder h = new StringBuilder();
                    for (Header x : r.headers()) {
                        if (h.length() > 0) h.append(';');
                        h.append(b64(x.key().getBytes(StandardCharsets.UTF_8))).append(':').append(b64(x.value()));
                    }
                    out.write(r.topic() + "\t" + r.partition() + "\t" + r.offset() + "\t" + r.timestamp() + "\t"
                            + r.timestampType().name() + "\t" + b64(r.key()) + "\t" + b64(r.value()) + "\t" + h + "\n");
                }
                pending.removeIf(tp -> c.position(tp) >= end.get(tp));
            }
            for (TopicPartition tp : tps)
                out.write("#end\t" + tp.topic() + "\t" + tp.partition() + "\t" + end.get(tp) + "\n");
        }
        out.flush();
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "1");
        return new KafkaConsumer<>(p);
    }

    static List<String[]> spec(Path file) throws Exception {
        List<String[]> out = new ArrayList<>();
        for (String line : Files.readAllLines(file, StandardCharsets.UTF_8))
            if (!line.isBlank()) out.add(line.split("\t", -1));
        return out;
    }

    static void seek(String bootstrap, Path file) throws Exception {
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            for (String[] f : spec(file)) {
                TopicPartition tp = new TopicPartition(f[0], Integer.parseInt(f[1]));
                long target = Long.parseLong(f[2]);
                c.assign(List.of(tp));
                long end = c.endOffsets(List.of(tp), Duration.ofSeconds(60)).get(tp);
                String first = "-";
                if (target < end) {
                    c.seek(tp, target);
                    long deadline = System.currentTimeMillis() + DEADLINE_MS;
                    while (first.equals("-")) {
                        if (System.currentTimeMillis() > deadline)
                            throw new IllegalStateException("no record at or after " + tp + "@" + target);
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                            first = Long.toString(r.offset());
                            break;
                        }
                        if (first.equals("-") && c.position(tp) >= end) break;
                    }
                }
                out.append(f[0]).append('\t').append(f[1]).append('\t').append(target).append('\t').append(first)
                        .append('\n');
            }
        }
        System.out.print(out);
    }

    static void times(String bootstrap, Path file) throws Exception {
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            for (String[] f : spec(file)) {
                TopicPartition tp = new TopicPartition(f[0], Integer.parseInt(f[1]));
                long ts = Long.parseLong(f[2]);
                OffsetAndTimestamp o = c.offsetsForTimes(Map.of(tp, ts), Duration.ofSeconds(60)).get(tp);
                out.append(f[0]).append('\t').append(f[1]).append('\t').append(ts).append('\t')
                        .append(o == null ? "-" : Long.toString(o.offset())).append('\t')
                        .append(o == null ? "-" : Long.toString(o.timestamp())).append('\n');
            }
        }
        System.out.print(out);
    }

    public static void main(String[] args) throws Exception {
        List<String> rest = List.of(args).subList(2, args.length);
        switch (args[0]) {
            case "create" -> create(args[1], Path.of(args[2]));
            case "leaders" -> leaders(args[1], rest);
            case "consume" -> consume(args[1], rest);
            case "seek" -> seek(args[1], Path.of(args[2]));
            case "times" -> times(args[1], Path.of(args[2]));
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }
}
