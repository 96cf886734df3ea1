"""Model management answers in one shape over both protocols (no I/O).

tritonclient.http returns Triton's JSON documents; tritonclient.grpc returns protobuf messages,
whose own JSON form drops default values and writes 64-bit integers as strings. The clients
return the HTTP shape on both: :func:`message_to_dict` writes a message as Triton's HTTP
endpoint does (every field but the unset ones that track presence — sub-messages, oneof
members —, numbers as numbers, enums by name).
"""

from typing import Any, Dict, List

__all__ = ["message_to_dict", "index_entries"]


def message_to_dict(message: Any) -> Dict[str, Any]:
    """A protobuf message as a dict of every field, but sub-messages and oneof members that are not set."""
    result = {}
    for field in message.DESCRIPTOR.fields:
        if _has_presence(field) and not message.HasField(field.name):
            continue
        result[field.name] = _field_value(field, getattr(message, field.name))
    return result


def index_entries(index: Any) -> List[Dict[str, Any]]:
    """The entries of a repository index: HTTP's list, or the ``models`` of gRPC's message as HTTP writes them.

    HTTP leaves out what is empty: a model never loaded has only its ``name``.
    """
    if isinstance(index, list):
        return index
    return [{key: value for key, value in message_to_dict(entry).items() if value != ""} for entry in index.models]


def _field_value(field: Any, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {key: _scalar(value_field, item) for key, item in value.items()}
    if _is_repeated(field):
        return [_scalar(field, item) for item in value]
    return _scalar(field, value)


def _scalar(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return message_to_dict(value)
    if field.enum_type is not None:
        return field.enum_type.values_by_number[value].name
    return value


def _has_presence(field: Any) -> bool:
    presence = getattr(field, "has_presence", None)  # older protobuf lacks it; Triton's protos are proto3
    if presence is not None:
        return presence
    return field.containing_oneof is not None or (field.message_type is not None and not _is_repeated(field))


def _is_repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)  # protobuf >= 5.28; `label` is deprecated there
    return repeated if repeated is not None else field.label == field.LABEL_REPEATED
