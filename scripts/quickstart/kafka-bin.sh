#!/bin/bash
# Writes the stand-in apache/kafka image's /opt/kafka/bin scripts into ROOT (the jars are Maven
# Central's, as scripts/install.sh fetches them; the distribution's bin/ is not among them): each runs
# its main class on the jars in /opt/kafka/libs, as the distribution's scripts do.
set -euo pipefail
root=$1
mkdir -p "$root/opt/kafka/bin"
tool() {
    cat >"$root/opt/kafka/bin/$1" <<EOT
#!/bin/bash
exec java \${KAFKA_HEAP_OPTS:--Xms32m -Xmx${3:-256m}} -XX:+UseSerialGC \${KAFKA_OPTS:-} -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties -Dkafka.logs.dir=/tmp -cp "/opt/kafka/libs/*" $2 "\$@"
EOT
    chmod 755 "$root/opt/kafka/bin/$1"
}
tool kafka-server-start.sh kafka.Kafka 512m
tool kafka-storage.sh kafka.tools.StorageTool
tool kafka-topics.sh org.apache.kafka.tools.TopicCommand
tool kafka-console-consumer.sh org.apache.kafka.tools.consumer.ConsoleConsumer
tool kafka-broker-api-versions.sh org.apache.kafka.tools.BrokerApiVersionsCommand
mkdir -p "$root/opt/kafka/config"
cat >"$root/opt/kafka/config/log4j2.properties" <<'EOT'
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = STDERR
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
EOT
