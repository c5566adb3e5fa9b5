"""The reference CCI driver: the policy every suite is first proven against."""
