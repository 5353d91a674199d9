package redrive.corpus.spring;

/** The application's own exceptions (what an on-call engineer must see, not Spring's wrappers). */
final class Exceptions {
    private Exceptions() {}

    static final class PaymentDeclinedException extends RuntimeException {
        PaymentDeclinedException(String message, Throwable cause) { super(message, cause); }
    }

    static final class OrderRejectedException extends RuntimeException {
        OrderRejectedException(String message, Throwable cause) { super(message, cause); }
    }
}
