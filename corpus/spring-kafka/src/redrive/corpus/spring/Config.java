package redrive.corpus.spring;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.IntegerDeserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.EnableKafkaRetryTopic;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.listener.DefaultErrorHandler;
import org.springframework.kafka.support.serializer.ErrorHandlingDeserializer;
import org.springframework.scheduling.TaskScheduler;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;
import org.springframework.util.backoff.FixedBackOff;

/**
 * The Spring setups that produce the corpus' dead letters: a {@code DefaultErrorHandler} with
 * a {@code DeadLetterPublishingRecoverer} (default destination resolver) per container
 * factory, {@code ErrorHandlingDeserializer}s around real Kafka deserializers, and
 * {@code @RetryableTopic} through {@code @EnableKafkaRetryTopic}.
 */
@Configuration
@EnableKafka
@EnableKafkaRetryTopic
public class Config {
    static String bootstrap() { return System.getProperty("corpus.bootstrap", "127.0.0.1:29092"); }

    @Bean
    public KafkaTemplate<byte[], byte[]> kafkaTemplate() {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        return new KafkaTemplate<>(new DefaultKafkaProducerFactory<>(p, new ByteArraySerializer(), new ByteArraySerializer()));
    }

    @Bean
    public TaskScheduler taskScheduler() {
        ThreadPoolTaskScheduler s = new ThreadPoolTaskScheduler();
        s.setPoolSize(2);
        return s;
    }

    static Map<String, Object> consumerProps() {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return p;
    }

    static <K, V> ConcurrentKafkaListenerContainerFactory<K, V> factory(
            Deserializer<K> key, Deserializer<V> value, KafkaTemplate<byte[], byte[]> template,
            boolean retainExceptionHeader, long retries, boolean deliveryAttemptHeader) {
        ConcurrentKafkaListenerContainerFactory<K, V> f = new ConcurrentKafkaListenerContainerFactory<>();
        f.setConsumerFactory(new DefaultKafkaConsumerFactory<>(consumerProps(), key, value));
        DeadLetterPublishingRecoverer dlpr = new DeadLetterPublishingRecoverer(template);
        dlpr.setRetainExceptionHeader(retainExceptionHeader);
        f.setCommonErrorHandler(new DefaultErrorHandler(dlpr, new FixedBackOff(0L, retries)));
        f.getContainerProperties().setDeliveryAttemptHeader(deliveryAttemptHeader);
        return f;
    }

    /** The default factory (also used by {@code @RetryableTopic}): 1 delivery + 2 in-memory retries. */
    @Bean
    public ConcurrentKafkaListenerContainerFactory<byte[], byte[]> kafkaListenerContainerFactory(KafkaTemplate<byte[], byte[]> t) {
        return factory(new ByteArrayDeserializer(), new ByteArrayDeserializer(), t, false, 2, false);
    }

    /** {@code ContainerProperties.deliveryAttemptHeader=true}, 1 delivery + 3 retries. */
    @Bean
    public ConcurrentKafkaListenerContainerFactory<byte[], byte[]> attemptHeaderFactory(KafkaTemplate<byte[], byte[]> t) {
        return factory(new ByteArrayDeserializer(), new ByteArrayDeserializer(), t, false, 3, true);
    }

    @Bean
    public ConcurrentKafkaListenerContainerFactory<byte[], Long> valueDeserFactory(KafkaTemplate<byte[], byte[]> t) {
        return factory(new ByteArrayDeserializer(), new ErrorHandlingDeserializer<>(new RecordingDeserializer<>(new LongDeserializer())), t, false, 2, false);
    }

    @Bean
    public ConcurrentKafkaListenerContainerFactory<byte[], Long> valueDeserRetainedFactory(KafkaTemplate<byte[], byte[]> t) {
        return factory(new ByteArrayDeserializer(), new ErrorHandlingDeserializer<>(new RecordingDeserializer<>(new LongDeserializer())), t, true, 2, false);
    }

    @Bean
    public ConcurrentKafkaListenerContainerFactory<Integer, byte[]> keyDeserFactory(KafkaTemplate<byte[], byte[]> t) {
        return factory(new ErrorHandlingDeserializer<>(new RecordingDeserializer<>(new IntegerDeserializer())), new ByteArrayDeserializer(), t, false, 2, false);
    }

    @Bean
    public Listeners listeners() { return new Listeners(); }
}
