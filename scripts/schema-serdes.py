#!/usr/bin/env python3
"""Ground truth for the schema-aware payload tests: record values serialized by Confluent's
own serializers (PyPI confluent-kafka: AvroSerializer, ProtobufSerializer, JSONSerializer),
in the Schema Registry wire format, their schemas registered by the serializers themselves
(auto-registration, as a producer does) in a real Schema Registry server.

    scripts/schema-serdes.py REGISTRY_URL TOPIC_PREFIX
        (run with the venv of scripts/setup-schema-serdes; REGISTRY_URL is a Confluent Schema
        Registry API, e.g. scripts/registry's; subjects are `<TOPIC_PREFIX>payments-value`, ...)

The Protobuf value's file imports `shop/common.proto`, which the serializer registers as a
subject of its own and references from the value's schema (Confluent's reference subject name
strategy: the import path), so a reader must follow the reference. The schema id is read back
from the serialized bytes (bytes 1..5), as any consumer would. Prints one JSON object: for each
of avro, protobuf, json the schema id, the value as base64 and the value the decoder must show
(Avro: the record as given; Protobuf: Google's json_format.MessageToDict, the Protobuf JSON
mapping; JSON: the object as given).
"""
import base64
import importlib
import json
import os
import subprocess
import sys
import tempfile

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

AVRO_SCHEMA = json.dumps({
    "type": "record", "name": "Payment", "namespace": "shop.payments",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount_cents", "type": "long"},
        {"name": "rate", "type": "double"},
        {"name": "captured", "type": "boolean"},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "REFUNDED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attributes", "type": {"type": "map", "values": "int"}},
        {"name": "card", "type": ["null", {"type": "record", "name": "Card", "fields": [
            {"name": "last4", "type": "string"}, {"name": "expiry_month", "type": "int"}]}],
         "default": None},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
})
AVRO_VALUE = {
    "id": "pay-7781", "amount_cents": 1234567890123, "rate": 0.25, "captured": True,
    "status": "PAID", "tags": ["eu", "card"], "attributes": {"retries": 3},
    "card": {"last4": "4242", "expiry_month": 12}, "note": None,
}

# Two top-level messages and a nested one: the value is the nested Order.Line, so its
# message indexes are [1, 0] (not the single 0 of the first message).
PROTO_SOURCE = """syntax = "proto3";
package shop.orders;

import "google/protobuf/timestamp.proto";
import "shop/common.proto";

message Ack { string id = 1; }

message Order {
  message Line {
    string sku = 1;
    int32 quantity = 2;
    int64 price_micros = 3;
    repeated string labels = 4;
    Kind kind = 5;
    google.protobuf.Timestamp added_at = 6;
    shop.common.Money unit_price = 7;
  }
  enum Kind { KIND_UNSPECIFIED = 0; PHYSICAL = 1; DIGITAL = 2; }
  string id = 1;
}
"""

# Imported by PROTO_SOURCE: a schema reference in the registry.
COMMON_PROTO_SOURCE = """syntax = "proto3";
package shop.common;

message Money {
  int64 micros = 1;
  string currency = 2;
}
"""

JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Refund", "type": "object",
    "properties": {"refund_id": {"type": "string"}, "cents": {"type": "integer"}},
    "required": ["refund_id", "cents"],
})
JSON_VALUE = {"refund_id": "r-19", "cents": 500}


def schema_id(framed):
    assert framed[0] == 0, "not the wire format"
    return int.from_bytes(framed[1:5], "big")


def main(url, prefix):
    registry = SchemaRegistryClient({"url": url})
    result = {}

    avro = AvroSerializer(registry, AVRO_SCHEMA)
    framed = avro(AVRO_VALUE, SerializationContext(prefix + "payments", MessageField.VALUE))
    result["avro"] = {"schema_id": schema_id(framed), "value": base64.b64encode(framed).decode(),
                      "expected": AVRO_VALUE}

    with tempfile.TemporaryDirectory() as gen:
        os.makedirs(os.path.join(gen, "shop"))
        with open(os.path.join(gen, "orders.proto"), "w") as f:
            f.write(PROTO_SOURCE)
        with open(os.path.join(gen, "shop", "common.proto"), "w") as f:
            f.write(COMMON_PROTO_SOURCE)
        from grpc_tools import protoc
        import grpc_tools
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        rc = protoc.main(["protoc", f"-I{gen}", f"-I{well_known}", f"--python_out={gen}",
                          "orders.proto", "shop/common.proto"])
        if rc != 0:
            raise SystemExit(f"protoc failed: {rc}")
        sys.path.insert(0, gen)
        orders = importlib.import_module("orders_pb2")
    line = orders.Order.Line(sku="SKU-1", quantity=3, price_micros=9_000_000_001,
                             labels=["gift", "fragile"], kind=orders.Order.DIGITAL)
    line.added_at.FromSeconds(1_796_104_800)
    line.unit_price.micros = 3_000_000_000
    line.unit_price.currency = "EUR"
    proto = ProtobufSerializer(orders.Order.Line, registry, {"use.deprecated.format": False})
    framed = proto(line, SerializationContext(prefix + "orders", MessageField.VALUE))
    from google.protobuf import json_format
    result["protobuf"] = {
        "schema_id": schema_id(framed), "value": base64.b64encode(framed).decode(),
        "expected": json_format.MessageToDict(line), "message": "shop.orders.Order.Line",
    }

    js = JSONSerializer(JSON_SCHEMA, registry)
    framed = js(JSON_VALUE, SerializationContext(prefix + "refunds", MessageField.VALUE))
    result["json"] = {"schema_id": schema_id(framed), "value": base64.b64encode(framed).decode(),
                      "expected": JSON_VALUE}

    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
