"""Model management answers in one shape over both protocols (no I/O).

tritonclient.http returns Triton's JSON documents; tritonclient.grpc returns protobuf messages.
The clients return the HTTP shape on both: :func:`message_to_dict` converts a message with
protobuf's own ``json_format`` (field names as in the .proto, every field but the unset ones
that track presence — sub-messages, oneof members —, enums by name) and then writes 64-bit
integers as numbers, as Triton's HTTP endpoint does (protobuf's JSON mapping writes them as
strings).
"""

import inspect
from typing import Any, Dict, List

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

__all__ = ["message_to_dict", "index_entries"]

_INT64_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)
# protobuf 5.26 renamed the option that writes fields left at their default value.
_ALL_FIELDS = (
    {"always_print_fields_with_no_presence": True}
    if "always_print_fields_with_no_presence" in inspect.signature(json_format.MessageToDict).parameters
    else {"including_default_value_fields": True}
)


def message_to_dict(message: Any) -> Dict[str, Any]:
    """A protobuf message as Triton's HTTP endpoint writes it: every field but unset sub-messages
    and oneof members, 64-bit integers as numbers."""
    as_dict = json_format.MessageToDict(message, preserving_proto_field_name=True, **_ALL_FIELDS)
    return _int64_as_numbers(message.DESCRIPTOR, as_dict)


def index_entries(index: Any) -> List[Dict[str, Any]]:
    """The entries of a repository index: HTTP's list, or the ``models`` of gRPC's message as HTTP writes them.

    HTTP leaves out what is empty: a model never loaded has only its ``name``.
    """
    if isinstance(index, list):
        return index
    return [{key: value for key, value in message_to_dict(entry).items() if value != ""} for entry in index.models]


def _int64_as_numbers(descriptor: Any, as_dict: Dict[str, Any]) -> Dict[str, Any]:
    """``as_dict`` (json_format's of a ``descriptor`` message) with its 64-bit integers as ints, in place."""
    for field in descriptor.fields:
        if field.name not in as_dict:
            continue
        value = as_dict[field.name]
        message_type = field.message_type
        if message_type is not None and message_type.GetOptions().map_entry:
            value_field = message_type.fields_by_name["value"]
            for key, item in value.items():
                value[key] = _convert(value_field, item)
        elif isinstance(value, list):
            as_dict[field.name] = [_convert(field, item) for item in value]
        else:
            as_dict[field.name] = _convert(field, value)
    return as_dict


def _convert(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return _int64_as_numbers(field.message_type, value)
    if field.type in _INT64_TYPES:
        return int(value)
    return value
