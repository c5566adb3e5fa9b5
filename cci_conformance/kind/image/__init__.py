"""Images for kind: the offline node image with the CCI-patched kubelet, and the images drivers run as."""
