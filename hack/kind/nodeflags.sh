# Sourced: NODE_FLAGS, the `docker run` flags that stand in for
# --privileged on a kind node container. This project's machines cannot run
# privileged containers (root lacks CAP_SYS_RESOURCE, so Docker fails
# "unable to apply caps"); these give the node what systemd, containerd and
# the kubelet need:
#   --cgroupns=private          the node's own cgroup root (the entrypoint
#                               makes cgroupfs writable and adds /kubelet)
#   --cap-add ALL/--cap-drop SYS_RESOURCE
#                               every capability the host's root has
#   seccomp, apparmor unconfined
#                               runc applies pods' own seccomp profiles
#   systempaths=unconfined      /proc/sys writable: the kubelet sets a few
#                               kernel settings at start (host-wide ones:
#                               vm.overcommit_memory=1, kernel.panic=10,
#                               kernel.panic_on_oops=1) and fails without
#   --device /dev/kmsg          the kubelet's OOM watcher reads it
#   --device-cgroup-rule 'a *:* rwm'
#                               the device cgroup --privileged would give:
#                               runc opens all devices for privileged pods
#                               (kube-proxy) and fails "devices.allow:
#                               operation not permitted" in a narrower parent
# shellcheck disable=SC2034
NODE_FLAGS=(
  --cgroupns=private
  --cap-add=ALL --cap-drop=SYS_RESOURCE
  --security-opt=seccomp=unconfined --security-opt=apparmor=unconfined
  --security-opt=systempaths=unconfined
  --device=/dev/kmsg
  '--device-cgroup-rule=a *:* rwm'
)
