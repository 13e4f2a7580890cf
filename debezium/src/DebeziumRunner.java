/*
 * pgoutbox Debezium reference runner.
 *
 * Runs the Debezium PostgreSQL connector through Debezium's embedded engine and does the rest the way a
 * Kafka Connect worker does: applies the configured transformations (SMTs, e.g. the Outbox Event Router),
 * converts key, value and headers with the configured converters, produces with a KafkaProducer that has
 * Connect's worker producer defaults, and hands offsets back to the engine only after the broker
 * acknowledged the records.
 *
 * Usage: DebeziumRunner --config FILE [--offsets FILE] [--set key=value]... [--progress N]
 *
 * Lines printed on stdout (everything else, i.e. logging, goes to stderr):
 *   DEBEZIUM STARTING           the engine is being started
 *   DEBEZIUM TASK STARTED       the connector task started (the replication slot exists from here on)
 *   DEBEZIUM STREAMING          the replication stream is started (streaming loop running)
 *   DEBEZIUM RECORDS n          every N acknowledged records, with --progress N
 *   DEBEZIUM STOPPED records=n  on exit
 *
 * Compiled by scripts/debezium.sh; no build tool involved.
 */

import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.HeaderConverter;

import io.debezium.config.Configuration;
import io.debezium.embedded.Connect;
import io.debezium.embedded.Transformations;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;

public final class DebeziumRunner {

    private static final String DEFAULT_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector";
    private static final String DEFAULT_NAME = "pgoutbox-debezium";
    private static final String JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter";
    private static final String SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter";

    private static final PrintStream OUT = System.out;

    private DebeziumRunner() {
    }

    static void say(String line) {
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static void usage(String error) {
        if (error != null) {
            System.err.println("error: " + error);
        }
        System.err.println("usage: DebeziumRunner --config FILE [--offsets FILE] [--set key=value]... [--progress N]");
        System.exit(error == null ? 0 : 2);
    }

    public static void main(String[] args) throws Exception {
        String configFile = null;
        String offsetsFile = null;
        long progress = 0;
        final Map<String, String> overrides = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            final String a = args[i];
            switch (a) {
                case "--config":
                case "--offsets":
                case "--set":
                case "--progress":
                    if (i + 1 >= args.length) {
                        usage("missing value after " + a);
                    }
                    final String v = args[++i];
                    if (a.equals("--config")) {
                        configFile = v;
                    }
                    else if (a.equals("--offsets")) {
                        offsetsFile = v;
                    }
                    else if (a.equals("--progress")) {
                        progress = Long.parseLong(v);
                    }
                    else {
                        final int eq = v.indexOf('=');
                        if (eq <= 0) {
                            usage("--set expects key=value, got " + v);
                        }
                        overrides.put(v.substring(0, eq).trim(), v.substring(eq + 1));
                    }
                    break;
                case "-h":
                case "--help":
                    usage(null);
                    break;
                default:
                    usage("unknown argument " + a);
            }
        }
        if (configFile == null) {
            usage("--config is required");
        }

        // Same parsing as Connect's Utils.loadProps (java.util.Properties, ISO-8859-1 with \\u escapes).
        final Properties fileProps = new Properties();
        try (InputStream in = new FileInputStream(configFile)) {
            fileProps.load(in);
        }
        final Map<String, String> cfg = new LinkedHashMap<>();
        for (String k : fileProps.stringPropertyNames()) {
            cfg.put(k, fileProps.getProperty(k).trim());
        }
        cfg.putAll(overrides);

        new DebeziumRunner.Run(cfg, offsetsFile, progress).run();
    }

    static final class Run {
        final Map<String, String> cfg;
        final String offsetsFile;
        final long progress;
        final String name;

        KafkaProducer<byte[], byte[]> producer;
        Admin admin;
        Converter keyConverter;
        Converter valueConverter;
        HeaderConverter headerConverter;
        Transformations transformations;
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine;

        final Set<String> knownTopics = new HashSet<>();
        final AtomicLong produced = new AtomicLong();
        final AtomicBoolean shuttingDown = new AtomicBoolean();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final CountDownLatch cleanedUp = new CountDownLatch(1);
        final CountDownLatch done = new CountDownLatch(1);
        volatile boolean streamingAnnounced = false;

        Run(Map<String, String> cfg, String offsetsFile, long progress) {
            this.cfg = cfg;
            this.offsetsFile = offsetsFile;
            this.progress = progress;
            this.name = cfg.getOrDefault("name", DEFAULT_NAME);
        }

        Map<String, Object> withPrefix(String prefix) {
            final Map<String, Object> out = new HashMap<>();
            for (Map.Entry<String, String> e : cfg.entrySet()) {
                if (e.getKey().startsWith(prefix) && e.getKey().length() > prefix.length()) {
                    out.put(e.getKey().substring(prefix.length()), e.getValue());
                }
            }
            return out;
        }

        static <T> T instantiate(String className, Class<T> type) throws Exception {
            final Class<?> c = Class.forName(className, true, DebeziumRunner.class.getClassLoader());
            return type.cast(c.getDeclaredConstructor().newInstance());
        }

        /** Like Connect's Plugins.newConverter: class from "key.converter", config = "key.converter.*" keys, configure(map, isKey). */
        Converter converter(String prefix, boolean isKey) throws Exception {
            final String cls = cfg.getOrDefault(prefix, JSON_CONVERTER);
            final Converter c = instantiate(cls, Converter.class);
            c.configure(withPrefix(prefix + "."), isKey);
            return c;
        }

        /** Like Connect's Plugins.newHeaderConverter: config = "header.converter.*" keys plus converter.type=header. */
        HeaderConverter headerConverter() throws Exception {
            final String cls = cfg.getOrDefault("header.converter", SIMPLE_HEADER_CONVERTER);
            final HeaderConverter c = instantiate(cls, HeaderConverter.class);
            final Map<String, Object> conf = withPrefix("header.converter.");
            conf.put("converter.type", "header");
            c.configure(conf);
            return c;
        }

        /** Connect's Worker.baseProducerConfigs, then producer.* and producer.override.* keys. */
        Map<String, Object> producerConfig() {
            final Map<String, Object> p = new HashMap<>();
            p.put("bootstrap.servers", cfg.getOrDefault("bootstrap.servers", "localhost:9092"));
            p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
            p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
            p.put("max.block.ms", Long.toString(Long.MAX_VALUE));
            p.put("enable.idempotence", "false");
            p.put("acks", "all");
            p.put("max.in.flight.requests.per.connection", "1");
            p.put("delivery.timeout.ms", Integer.toString(Integer.MAX_VALUE));
            p.put("client.id", "connector-producer-" + name + "-0");
            p.putAll(withPrefix("producer."));
            p.keySet().removeIf(k -> k.startsWith("override."));
            p.putAll(withPrefix("producer.override."));
            return p;
        }

        Map<String, Object> adminConfig() {
            final Map<String, Object> a = new HashMap<>();
            a.put("bootstrap.servers", cfg.getOrDefault("bootstrap.servers", "localhost:9092"));
            a.put("client.id", "connector-adminclient-" + name + "-0");
            a.putAll(withPrefix("admin."));
            a.keySet().removeIf(k -> k.startsWith("override."));
            a.putAll(withPrefix("admin.override."));
            return a;
        }

        Properties engineConfig() throws IOException {
            final Properties p = new Properties();
            p.putAll(cfg);
            p.put("name", name);
            p.putIfAbsent("connector.class", DEFAULT_CONNECTOR);
            p.putIfAbsent("offset.flush.interval.ms", "60000");
            String file = offsetsFile;
            if (file == null) {
                final Path dir = Files.createTempDirectory("pgoutbox-debezium-");
                dir.toFile().deleteOnExit();
                file = dir.resolve("offsets.dat").toString();
                new java.io.File(file).deleteOnExit();
            }
            p.put("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
            p.put("offset.storage.file.filename", file);
            // The transformation chain runs in our handler, like in a Connect worker, so that records
            // dropped by an SMT are still handed back to the task in order (Connect commits them too).
            p.remove("transforms");
            p.remove("predicates");
            return p;
        }

        void ensureTopic(String topic) throws Exception {
            if (knownTopics.contains(topic)) {
                return;
            }
            final Set<String> existing = admin.listTopics().names().get();
            knownTopics.addAll(existing);
            if (knownTopics.contains(topic)) {
                return;
            }
            final Optional<Integer> partitions = optionalInt(cfg.get("topic.creation.default.partitions"), 1);
            final Optional<Integer> rf = optionalInt(cfg.get("topic.creation.default.replication.factor"), 1);
            final NewTopic nt = new NewTopic(topic, partitions, rf.map(Integer::shortValue));
            try {
                admin.createTopics(List.of(nt)).all().get();
                System.err.println("pgoutbox-debezium: created topic " + topic + " partitions=" + partitions.map(String::valueOf).orElse("default"));
            }
            catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            knownTopics.add(topic);
        }

        static Optional<Integer> optionalInt(String v, int dflt) {
            if (v == null || v.isBlank()) {
                return Optional.of(dflt);
            }
            final int n = Integer.parseInt(v.trim());
            return n < 0 ? Optional.empty() : Optional.of(n);
        }

        /** WorkerSourceTask.convertTransformedRecord: headers first, then key, then value. */
        ProducerRecord<byte[], byte[]> convert(SourceRecord r) {
            final String topic = r.topic();
            final RecordHeaders headers = new RecordHeaders();
            for (Header h : r.headers()) {
                headers.add(h.key(), headerConverter.fromConnectHeader(topic, h.key(), h.schema(), h.value()));
            }
            final byte[] key = keyConverter.fromConnectData(topic, headers, r.keySchema(), r.key());
            final byte[] value = valueConverter.fromConnectData(topic, headers, r.valueSchema(), r.value());
            return new ProducerRecord<>(topic, r.kafkaPartition(), checkTimestamp(r.timestamp()), key, value, headers);
        }

        /** ConnectUtils.checkAndConvertTimestamp. */
        static Long checkTimestamp(Long ts) {
            if (ts == null || ts >= 0) {
                return ts;
            }
            if (ts == -1L) {
                return null;
            }
            throw new ConnectException("Invalid record timestamp " + ts);
        }

        final class Handler implements DebeziumEngine.ChangeConsumer<RecordChangeEvent<SourceRecord>> {
            @Override
            public void handleBatch(List<RecordChangeEvent<SourceRecord>> events,
                                    DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer)
                    throws InterruptedException {
                final List<Future<RecordMetadata>> sends = new ArrayList<>(events.size());
                try {
                    for (RecordChangeEvent<SourceRecord> ev : events) {
                        final SourceRecord transformed = transformations.transform(ev.record());
                        if (transformed == null) {
                            sends.add(null); // dropped by an SMT: committed in order, like Connect
                            continue;
                        }
                        ensureTopic(transformed.topic());
                        sends.add(producer.send(convert(transformed)));
                    }
                    for (int i = 0; i < events.size(); i++) {
                        final Future<RecordMetadata> f = sends.get(i);
                        if (f != null) {
                            f.get();
                            final long n = produced.incrementAndGet();
                            if (n == 1) {
                                say("DEBEZIUM FIRST");
                            }
                            if (progress > 0 && n % progress == 0) {
                                say("DEBEZIUM RECORDS " + n);
                            }
                        }
                        committer.markProcessed(events.get(i));
                    }
                }
                catch (InterruptedException e) {
                    throw e;
                }
                catch (ExecutionException e) {
                    throw new ConnectException("Unrecoverable exception from producer send callback", e.getCause());
                }
                catch (RuntimeException e) {
                    throw e;
                }
                catch (Exception e) {
                    throw new ConnectException(e);
                }
                committer.markBatchFinished();
                if (!streamingAnnounced && !events.isEmpty()) {
                    announceStreaming();
                }
            }

            @Override
            public boolean supportsTombstoneEvents() {
                // Keep the connector's own default for tombstones.on.delete (true), as under Connect.
                return true;
            }
        }

        void announceStreaming() {
            synchronized (this) {
                if (!streamingAnnounced) {
                    streamingAnnounced = true;
                    say("DEBEZIUM STREAMING");
                }
            }
        }

        /**
         * "DEBEZIUM STREAMING" is printed when PostgresStreamingChangeEventSource logs "Processing messages",
         * i.e. right after START_REPLICATION, when the streaming loop begins. (The streaming metrics MBean's
         * Connected flag turns true earlier, before the replication stream is started.) The log line is
         * caught by an appender added to that logger, which log4j2.properties keeps at INFO.
         */
        boolean watchStreamingLog() {
            try {
                final org.apache.logging.log4j.core.LoggerContext ctx = (org.apache.logging.log4j.core.LoggerContext) org.apache.logging.log4j.LogManager
                        .getContext(false);
                final org.apache.logging.log4j.core.config.Configuration conf = ctx.getConfiguration();
                final org.apache.logging.log4j.core.appender.AbstractAppender appender = new org.apache.logging.log4j.core.appender.AbstractAppender(
                        "pgoutbox-streaming-watch", null, null, true, org.apache.logging.log4j.core.config.Property.EMPTY_ARRAY) {
                    @Override
                    public void append(org.apache.logging.log4j.core.LogEvent event) {
                        final String msg = event.getMessage().getFormattedMessage();
                        if (msg != null && msg.startsWith("Processing messages")) {
                            announceStreaming();
                        }
                    }
                };
                appender.start();
                conf.addAppender(appender);
                final String loggerName = "io.debezium.connector.postgresql.PostgresStreamingChangeEventSource";
                org.apache.logging.log4j.core.config.LoggerConfig lc = conf.getLoggerConfig(loggerName);
                if (!lc.getName().equals(loggerName)) {
                    lc = new org.apache.logging.log4j.core.config.LoggerConfig(loggerName, org.apache.logging.log4j.Level.INFO, true);
                    conf.addLogger(loggerName, lc);
                }
                if (lc.getLevel().isMoreSpecificThan(org.apache.logging.log4j.Level.WARN)) {
                    lc.setLevel(org.apache.logging.log4j.Level.INFO);
                }
                lc.addAppender(appender, org.apache.logging.log4j.Level.INFO, null);
                ctx.updateLoggers();
                return true;
            }
            catch (Throwable t) {
                System.err.println("pgoutbox-debezium: cannot watch the streaming log line (" + t + "), using the metrics MBean instead");
                return false;
            }
        }

        /** Fallback: the streaming metrics MBean reports Connected=true (slightly before streaming starts). */
        boolean checkStreamingMBean() {
            if (streamingAnnounced) {
                return true;
            }
            try {
                final MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
                for (ObjectName on : mbs.queryNames(new ObjectName("debezium.*:type=connector-metrics,context=streaming,*"), null)) {
                    if (Boolean.TRUE.equals(mbs.getAttribute(on, "Connected"))) {
                        announceStreaming();
                        return true;
                    }
                }
            }
            catch (Exception e) {
                // not registered yet
            }
            return false;
        }

        void run() throws Exception {
            keyConverter = converter("key.converter", true);
            valueConverter = converter("value.converter", false);
            headerConverter = headerConverter();
            transformations = new Transformations(Configuration.from(cfg));
            producer = new KafkaProducer<>(producerConfig());
            admin = Admin.create(adminConfig());

            final Properties props = engineConfig();
            engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                    .using(props)
                    .notifying(new Handler())
                    .using(new DebeziumEngine.ConnectorCallback() {
                        @Override
                        public void taskStarted() {
                            say("DEBEZIUM TASK STARTED");
                        }
                    })
                    .using((success, message, error) -> {
                        if (!success) {
                            failure.compareAndSet(null, error != null ? error : new RuntimeException(message));
                            System.err.println("pgoutbox-debezium: engine failed: " + message);
                            if (error != null) {
                                error.printStackTrace();
                            }
                        }
                        done.countDown();
                    })
                    .build();

            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                shuttingDown.set(true);
                try {
                    if (done.getCount() > 0) {
                        engine.close();
                    }
                }
                catch (Exception e) {
                    System.err.println("pgoutbox-debezium: error closing engine: " + e);
                }
                try {
                    cleanedUp.await(60, TimeUnit.SECONDS);
                }
                catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "pgoutbox-debezium-shutdown"));

            final boolean watchingLog = watchStreamingLog();
            final Thread watcher = new Thread(() -> {
                while (!watchingLog && !streamingAnnounced && done.getCount() > 0) {
                    if (checkStreamingMBean()) {
                        return;
                    }
                    try {
                        Thread.sleep(20);
                    }
                    catch (InterruptedException e) {
                        return;
                    }
                }
            }, "pgoutbox-debezium-streaming-watch");
            watcher.setDaemon(true);

            say("DEBEZIUM STARTING");
            watcher.start();
            try {
                engine.run(); // returns when the engine stops (close() or failure)
                done.await(60, TimeUnit.SECONDS);
            }
            finally {
                try {
                    producer.close(Duration.ofSeconds(30));
                }
                catch (Exception e) {
                    System.err.println("pgoutbox-debezium: error closing producer: " + e);
                }
                try {
                    admin.close(Duration.ofSeconds(5));
                }
                catch (Exception e) {
                    // ignore
                }
                try {
                    transformations.close();
                }
                catch (Exception e) {
                    // ignore
                }
                say("DEBEZIUM STOPPED records=" + produced.get());
                cleanedUp.countDown();
            }
            if (!shuttingDown.get()) {
                System.exit(failure.get() == null ? 0 : 1);
            }
        }
    }
}
