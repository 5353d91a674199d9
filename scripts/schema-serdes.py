#!/usr/bin/env python3
"""Ground truth for the schema-aware payload tests: record values serialized by Confluent's
own serializers (PyPI confluent-kafka: AvroSerializer, ProtobufSerializer, JSONSerializer),
in the Schema Registry wire format, with the schemas they were registered under written to a
schema directory as redrive reads it (`<id>.avsc`, `<id>.proto`, `<id>.json`).

    scripts/schema-serdes.py OUT_DIR     (run with the venv of scripts/setup-schema-serdes)

The serializers register their schemas with confluent-kafka's in-process registry client
(`mock://` URL): no registry server from the package registries runs here (docs/payloads.md,
"Testing"). The schema id is read back from the serialized bytes (bytes 1..5), as any consumer
would. Prints one JSON object: for each of avro, protobuf, json the schema id, the value as
base64 and the value the decoder must show (Avro: the record as given; Protobuf: Google's
json_format.MessageToDict, the Protobuf JSON mapping; JSON: the object as given).
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

message Ack { string id = 1; }

message Order {
  message Line {
    string sku = 1;
    int32 quantity = 2;
    int64 price_micros = 3;
    repeated string labels = 4;
    Kind kind = 5;
    google.protobuf.Timestamp added_at = 6;
  }
  enum Kind { KIND_UNSPECIFIED = 0; PHYSICAL = 1; DIGITAL = 2; }
  string id = 1;
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


def main(out):
    os.makedirs(out, exist_ok=True)
    registry = SchemaRegistryClient.new_client({"url": "mock://redrive-tests"})
    result = {}

    avro = AvroSerializer(registry, AVRO_SCHEMA)
    framed = avro(AVRO_VALUE, SerializationContext("payments", MessageField.VALUE))
    sid = schema_id(framed)
    with open(os.path.join(out, f"{sid}.avsc"), "w") as f:
        f.write(AVRO_SCHEMA)
    result["avro"] = {"schema_id": sid, "value": base64.b64encode(framed).decode(), "expected": AVRO_VALUE}

    with tempfile.TemporaryDirectory() as gen:
        with open(os.path.join(gen, "orders.proto"), "w") as f:
            f.write(PROTO_SOURCE)
        from grpc_tools import protoc
        import grpc_tools
        well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
        rc = protoc.main(["protoc", f"-I{gen}", f"-I{well_known}", f"--python_out={gen}", "orders.proto"])
        if rc != 0:
            raise SystemExit(f"protoc failed: {rc}")
        sys.path.insert(0, gen)
        orders = importlib.import_module("orders_pb2")
    line = orders.Order.Line(sku="SKU-1", quantity=3, price_micros=9_000_000_001,
                             labels=["gift", "fragile"], kind=orders.Order.DIGITAL)
    line.added_at.FromSeconds(1_796_104_800)
    proto = ProtobufSerializer(orders.Order.Line, registry, {"use.deprecated.format": False})
    framed = proto(line, SerializationContext("orders", MessageField.VALUE))
    sid = schema_id(framed)
    with open(os.path.join(out, f"{sid}.proto"), "w") as f:
        f.write(PROTO_SOURCE)
    from google.protobuf import json_format
    result["protobuf"] = {
        "schema_id": sid, "value": base64.b64encode(framed).decode(),
        "expected": json_format.MessageToDict(line), "message": "shop.orders.Order.Line",
    }

    js = JSONSerializer(JSON_SCHEMA, registry)
    framed = js(JSON_VALUE, SerializationContext("refunds", MessageField.VALUE))
    sid = schema_id(framed)
    with open(os.path.join(out, f"{sid}.json"), "w") as f:
        f.write(JSON_SCHEMA)
    result["json"] = {"schema_id": sid, "value": base64.b64encode(framed).decode(), "expected": JSON_VALUE}

    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
