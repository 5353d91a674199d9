package redrive.corpus.spring;

import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.Objects;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.springframework.kafka.annotation.BackOff;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.annotation.RetryableTopic;

/** The application's listeners: each fails the way real application code does. */
public class Listeners {

    /** A domain exception with an I/O cause. */
    @KafkaListener(id = "payments", topics = "payments", groupId = "payments-service")
    public void payments(ConsumerRecord<byte[], byte[]> r) {
        throw Failures.listenerFailed(r, "payments", new Exceptions.PaymentDeclinedException(
                "Payment 4711 declined by provider", new SocketTimeoutException("Read timed out")));
    }

    /** A validation failure without a cause, with the delivery-attempt header switched on. */
    @KafkaListener(id = "invoices", topics = "invoices", groupId = "billing", containerFactory = "attemptHeaderFactory")
    public void invoices(ConsumerRecord<byte[], byte[]> r) {
        throw Failures.listenerFailed(r, "invoices", new IllegalArgumentException("invoice total must be positive: -5"));
    }

    @KafkaListener(id = "meter-readings", topics = "meter-readings", groupId = "metering", containerFactory = "valueDeserFactory")
    public void meterReadings(ConsumerRecord<byte[], Long> r) {
        // Never reached for the bad record: the deserializer fails first.
    }

    @KafkaListener(id = "meter-readings-retained", topics = "meter-readings-retained", groupId = "metering-retained", containerFactory = "valueDeserRetainedFactory")
    public void meterReadingsRetained(ConsumerRecord<byte[], Long> r) {
    }

    @KafkaListener(id = "sensors", topics = "sensors", groupId = "sensor-service", containerFactory = "keyDeserFactory")
    public void sensors(ConsumerRecord<Integer, byte[]> r) {
    }

    /** Non-blocking retries: orders -> orders-retry (x2) -> orders-dlt. */
    @RetryableTopic(attempts = "3", backOff = @BackOff(delay = 200))
    @KafkaListener(id = "orders", topics = "orders", groupId = "order-service")
    public void orders(ConsumerRecord<byte[], byte[]> r) {
        throw Failures.listenerFailed(r, "orders", new Exceptions.OrderRejectedException(
                "order o-1001 rejected: credit limit exceeded", new IllegalStateException("limit 500.00 < 731.20")));
    }

    /** A dead letter whose reprocessing from the DLT fails again: refunds -> refunds-dlt -> refunds-dlt-dlt. */
    @KafkaListener(id = "refunds", topics = "refunds", groupId = "refund-service")
    public void refunds(ConsumerRecord<byte[], byte[]> r) {
        throw Failures.listenerFailed(r, "refunds", new IllegalStateException("refund r-3 exceeds the original charge"));
    }

    @KafkaListener(id = "refunds-dlt-replayer", topics = "refunds-dlt", groupId = "refund-dlt-replayer")
    public void refundsDlt(ConsumerRecord<byte[], byte[]> r) {
        throw Failures.listenerFailed(r, "refunds", new UnsupportedOperationException("refund r-3 still exceeds the charge on replay"));
    }

    /** A tombstone and a record with a null key, both failing in the application's code. */
    @KafkaListener(id = "accounts", topics = "accounts", groupId = "account-service")
    public void accounts(ConsumerRecord<byte[], byte[]> r) {
        try {
            Objects.requireNonNull(r.value(), "account payload is null (tombstone)");
            if (r.key() == null) {
                throw new IllegalStateException("account record without key: " + new String(r.value(), StandardCharsets.UTF_8));
            }
        } catch (RuntimeException e) {
            throw Failures.listenerFailed(r, "accounts", e);
        }
    }
}
