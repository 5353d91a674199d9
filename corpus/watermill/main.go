// Watermill poison-queue dead letters (github.com/ThreeDotsLabs/watermill, Kafka Pub/Sub from
// watermill-kafka): a router whose handler returns an error, behind the Retry and PoisonQueue
// middlewares. The handler records the ground truth at each failure; the poisoned records are
// read back from the poison topic with a plain sarama consumer (bytes, not Watermill's
// unmarshaler). Usage: go run . -brokers 127.0.0.1:29092 -out testkit/corpus/watermill
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
)

// ErrOutOfStock is the application's own error.
var ErrOutOfStock = errors.New("out of stock")

type exception struct {
	Class   string  `json:"class"`
	Message *string `json:"message"`
}

type truth struct {
	SourceTopic       *string     `json:"source_topic"`
	SourcePartition   *int32      `json:"source_partition"`
	SourceOffset      *int64      `json:"source_offset"`
	SourceTimestampMs *int64      `json:"source_timestamp_ms"`
	ConsumerGroup     *string     `json:"consumer_group"`
	Attempts          int         `json:"attempts"`
	Exception         []exception `json:"exception"`
	MessageID         *string     `json:"message_id"`
}

type header struct {
	Name  string  `json:"name"`
	Value *string `json:"value_b64"`
}

type record struct {
	DlqTopic      string   `json:"dlq_topic"`
	DlqPartition  int32    `json:"dlq_partition"`
	DlqOffset     int64    `json:"dlq_offset"`
	TimestampMs   *int64   `json:"timestamp_ms"`
	TimestampType string   `json:"timestamp_type"`
	Key           *string  `json:"key_b64"`
	Value         *string  `json:"value_b64"`
	Headers       []header `json:"headers"`
	Truth         truth    `json:"truth"`
}

type corpusCase struct {
	Framework        string   `json:"framework"`
	FrameworkVersion string   `json:"framework_version"`
	Case             string   `json:"case"`
	Setup            string   `json:"setup"`
	NotInHeaders     []string `json:"not_in_headers"`
	Records          []record `json:"records"`
}

func b64(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func ptr[T any](v T) *T { return &v }

// chain is the error and what it wraps (errors.Unwrap), outermost first; the class is the Go type.
func chain(err error) []exception {
	var out []exception
	for e := err; e != nil && len(out) < 16; e = errors.Unwrap(e) {
		out = append(out, exception{Class: fmt.Sprintf("%T", e), Message: ptr(e.Error())})
	}
	return out
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "corpus-watermill"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

func watermillVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/ThreeDotsLabs/watermill" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// readBack waits (up to 90 s) for n records on topic and returns them with their raw bytes.
func readBack(brokers []string, topic string, n int) ([]*sarama.ConsumerMessage, error) {
	c, err := sarama.NewConsumer(brokers, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(90 * time.Second)
	var pc sarama.PartitionConsumer
	for {
		pc, err = c.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: %w", topic, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case <-time.After(time.Until(deadline)):
			return nil, fmt.Errorf("%s: %d of %d records before the deadline", topic, len(out), n)
		}
	}
	select {
	case m := <-pc.Messages():
		return nil, fmt.Errorf("%s: unexpected extra record at offset %d", topic, m.Offset)
	case <-time.After(1500 * time.Millisecond):
	}
	return out, nil
}

func toRecord(m *sarama.ConsumerMessage, t truth) record {
	r := record{DlqTopic: m.Topic, DlqPartition: m.Partition, DlqOffset: m.Offset, TimestampType: "CreateTime",
		Key: b64(m.Key), Value: b64(m.Value), Truth: t, Headers: []header{}}
	if !m.Timestamp.IsZero() {
		r.TimestampMs = ptr(m.Timestamp.UnixMilli())
	}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{Name: string(h.Key), Value: b64(h.Value)})
	}
	return r
}

func main() {
	brokersFlag := flag.String("brokers", "127.0.0.1:29092", "bootstrap broker")
	outDir := flag.String("out", "testkit/corpus/watermill", "output directory")
	flag.Parse()
	brokers := []string{*brokersFlag}
	logger := watermill.NewStdLogger(false, false)

	const source, poison, group = "stock-reservations", "stock-reservations-poison", "inventory-service"
	admin, err := sarama.NewClusterAdmin(brokers, saramaConfig())
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range []string{source, poison} {
		if err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
			log.Fatal(err)
		}
	}
	admin.Close()

	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Marshaler: kafka.DefaultMarshaler{},
		OverwriteSaramaConfig: saramaConfig()}, logger)
	if err != nil {
		log.Fatal(err)
	}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Unmarshaler: kafka.DefaultMarshaler{},
		OverwriteSaramaConfig: saramaConfig(), ConsumerGroup: group}, logger)
	if err != nil {
		log.Fatal(err)
	}

	var mu sync.Mutex
	var t truth
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		log.Fatal(err)
	}
	pq, err := middleware.PoisonQueue(pub, poison)
	if err != nil {
		log.Fatal(err)
	}
	// PoisonQueue outside Retry: the message is poisoned once the retries are used up.
	router.AddMiddleware(pq, middleware.Retry{MaxRetries: 2, InitialInterval: 50 * time.Millisecond, Logger: logger}.Middleware)
	router.AddConsumerHandler("reserve_stock", source, sub, func(msg *message.Message) error {
		err := fmt.Errorf("cannot reserve stock for order o-9: %w", ErrOutOfStock)
		mu.Lock()
		defer mu.Unlock()
		ctx := msg.Context()
		if t.SourceTopic == nil {
			t.SourceTopic = ptr(message.SubscribeTopicFromCtx(ctx))
			if p, ok := kafka.MessagePartitionFromCtx(ctx); ok {
				t.SourcePartition = ptr(p)
			}
			if o, ok := kafka.MessagePartitionOffsetFromCtx(ctx); ok {
				t.SourceOffset = ptr(o)
			}
			if ts, ok := kafka.MessageTimestampFromCtx(ctx); ok {
				t.SourceTimestampMs = ptr(ts.UnixMilli())
			}
			t.ConsumerGroup = ptr(group)
			t.MessageID = ptr(msg.UUID)
		}
		t.Attempts++
		t.Exception = chain(err)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := router.Run(ctx); err != nil {
			log.Fatal(err)
		}
	}()
	<-router.Running()

	msg := message.NewMessage("3f1e7f0a-6a43-4c1f-9d7e-2b8f9c0d1e2a", []byte(`{"order":"o-9","sku":"sku-9","qty":2}`))
	msg.Metadata.Set("traceparent", "00-7d3f0c1b2a4e4f6a8b9c0d1e2f3a4b5c-0a1b2c3d4e5f6a7b-01")
	if err := pub.Publish(source, msg); err != nil {
		log.Fatal(err)
	}

	got, err := readBack(brokers, poison, 1)
	if err != nil {
		log.Fatal(err)
	}
	mu.Lock()
	rec := toRecord(got[0], t)
	mu.Unlock()
	c := corpusCase{
		Framework: "watermill", FrameworkVersion: watermillVersion(), Case: "poison-queue",
		Setup: "watermill-kafka v3 Subscriber (ConsumerGroup inventory-service) and Publisher with DefaultMarshaler; router middlewares " +
			"PoisonQueue(pub, stock-reservations-poison) outside Retry{MaxRetries: 2}; the handler returns an error wrapping ErrOutOfStock",
		NotInHeaders: []string{"source_partition", "source_offset", "source_timestamp_ms", "consumer_group", "error_class", "retry_count"},
		Records:      []record{rec},
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		log.Fatal(err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(*outDir, "poison-queue.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("corpus: wrote %s (1 dead letter(s))\n", path)
	cancel()
	_ = router.Close()
}
