from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PingResponse(_message.Message):
    __slots__ = ("generation", "mode", "drivers", "pid", "registrations")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DRIVERS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATIONS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    mode: str
    drivers: _containers.RepeatedScalarFieldContainer[str]
    pid: int
    registrations: int
    def __init__(self, generation: _Optional[int] = ..., mode: _Optional[str] = ..., drivers: _Optional[_Iterable[str]] = ..., pid: _Optional[int] = ..., registrations: _Optional[int] = ...) -> None: ...

class JsonMessage(_message.Message):
    __slots__ = ("json",)
    JSON_FIELD_NUMBER: _ClassVar[int]
    json: str
    def __init__(self, json: _Optional[str] = ...) -> None: ...

class PodRef(_message.Message):
    __slots__ = ("pod_uid",)
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    pod_uid: str
    def __init__(self, pod_uid: _Optional[str] = ...) -> None: ...

class ContainerRef(_message.Message):
    __slots__ = ("pod_uid", "container")
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    pod_uid: str
    container: str
    def __init__(self, pod_uid: _Optional[str] = ..., container: _Optional[str] = ...) -> None: ...
