// What a real Kafka node reports through the admin API, for tests/realkafka/test_unify_judged_by_kafka.py.
// Compiled once per version at test time (javac against the version's lib/, like RealKafkaClient), public API only.
//
//   features BOOTSTRAP                   describeFeatures: one line per finalized feature,
//                                        "finalized<TAB>name<TAB>min level<TAB>max level", then
//                                        "epoch<TAB>finalized features epoch" ("-" when absent)
//   scram    BOOTSTRAP                   describeUserScramCredentials (every user): one line per
//                                        credential, "user<TAB>mechanism<TAB>iterations"
//   auth     BOOTSTRAP MECHANISM USER PASSWORD
//                                        connects through a SASL_PLAINTEXT listener with SCRAM
//                                        (MECHANISM: SCRAM-SHA-256 or SCRAM-SHA-512) and prints
//                                        "authenticated<TAB>USER<TAB>cluster id"; exit 3 with
//                                        "failed<TAB>USER<TAB>exception" when the broker refuses
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

public class RealKafkaAdmin {
    static Admin admin(String bootstrap, Properties extra) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        p.putAll(extra);
        return Admin.create(p);
    }

    static void features(String bootstrap) throws Exception {
        try (Admin a = admin(bootstrap, new Properties())) {
            FeatureMetadata m = a.describeFeatures().featureMetadata().get();
            for (Map.Entry<String, FinalizedVersionRange> e : new TreeMap<>(m.finalizedFeatures()).entrySet())
                System.out.println("finalized\t" + e.getKey() + "\t" + e.getValue().minVersionLevel() + "\t"
                        + e.getValue().maxVersionLevel());
            System.out.println("epoch\t" + (m.finalizedFeaturesEpoch().isPresent()
                    ? m.finalizedFeaturesEpoch().get().toString() : "-"));
        }
    }

    static void scram(String bootstrap) throws Exception {
        try (Admin a = admin(bootstrap, new Properties())) {
            Map<String, UserScramCredentialsDescription> all = a.describeUserScramCredentials().all().get();
            for (UserScramCredentialsDescription d : new TreeMap<>(all).values())
                for (ScramCredentialInfo c : d.credentialInfos())
                    System.out.println(d.name() + "\t" + c.mechanism().mechanismName() + "\t" + c.iterations());
        }
    }

    static void auth(String bootstrap, String mechanism, String user, String password) throws Exception {
        Properties p = new Properties();
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", mechanism);
        p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        try (Admin a = admin(bootstrap, p)) {
            String id = a.describeCluster(new DescribeClusterOptions().timeoutMs(30000)).clusterId().get();
            System.out.println("authenticated\t" + user + "\t" + id);
        } catch (ExecutionException e) {
            System.out.println("failed\t" + user + "\t" + e.getCause());
            System.out.flush();
            System.exit(3);
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "features" -> features(args[1]);
            case "scram" -> scram(args[1]);
            case "auth" -> auth(args[1], args[2], args[3], args[4]);
            default -> throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }
}
