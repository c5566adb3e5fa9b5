from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdmitRequest(_message.Message):
    __slots__ = ("namespace", "claim_uid", "claim_name", "availableCpus", "pod", "container", "resource_handle")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_UID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    AVAILABLECPUS_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_HANDLE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    claim_uid: str
    claim_name: str
    availableCpus: str
    pod: str
    container: str
    resource_handle: str
    def __init__(self, namespace: _Optional[str] = ..., claim_uid: _Optional[str] = ..., claim_name: _Optional[str] = ..., availableCpus: _Optional[str] = ..., pod: _Optional[str] = ..., container: _Optional[str] = ..., resource_handle: _Optional[str] = ...) -> None: ...

class ResourceSet(_message.Message):
    __slots__ = ("cpuset", "exclusive")
    CPUSET_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    cpuset: str
    exclusive: bool
    def __init__(self, cpuset: _Optional[str] = ..., exclusive: _Optional[bool] = ...) -> None: ...

class AdmitResponse(_message.Message):
    __slots__ = ("rSet", "err", "groups")
    RSET_FIELD_NUMBER: _ClassVar[int]
    ERR_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    rSet: ResourceSet
    err: str
    groups: _containers.RepeatedCompositeFieldContainer[ResourceSet]
    def __init__(self, rSet: _Optional[_Union[ResourceSet, _Mapping]] = ..., err: _Optional[str] = ..., groups: _Optional[_Iterable[_Union[ResourceSet, _Mapping]]] = ...) -> None: ...

class AddResourceRequest(_message.Message):
    __slots__ = ("cgroup", "pod", "container", "container_id")
    CGROUP_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    cgroup: str
    pod: str
    container: str
    container_id: str
    def __init__(self, cgroup: _Optional[str] = ..., pod: _Optional[str] = ..., container: _Optional[str] = ..., container_id: _Optional[str] = ...) -> None: ...

class AddResourceResponse(_message.Message):
    __slots__ = ("err",)
    ERR_FIELD_NUMBER: _ClassVar[int]
    err: str
    def __init__(self, err: _Optional[str] = ...) -> None: ...

class RemoveResourceRequest(_message.Message):
    __slots__ = ("namespace", "claim_uid", "claim_name", "container_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_UID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    claim_uid: str
    claim_name: str
    container_id: str
    def __init__(self, namespace: _Optional[str] = ..., claim_uid: _Optional[str] = ..., claim_name: _Optional[str] = ..., container_id: _Optional[str] = ...) -> None: ...

class RemoveResourceResponse(_message.Message):
    __slots__ = ("err",)
    ERR_FIELD_NUMBER: _ClassVar[int]
    err: str
    def __init__(self, err: _Optional[str] = ...) -> None: ...
