# Sourced by the scripts that install Debian packages on a fresh machine
# (.ci/run, hack/kind/docker.sh, hack/kind/node-image.sh).
#
# apt_install [--no-install-recommends] PACKAGE...: apt-get update, then
# install quietly. The lock timeout: another apt-get (one of these scripts
# running beside another, a machine's own unattended upgrade) may hold the
# dpkg lock for a while.
apt_install() {
  local opts=()
  if [ "${1:-}" = --no-install-recommends ]; then opts+=("$1"); shift; fi
  [ "$(id -u)" = 0 ] || { echo "installing $* with apt-get needs root" >&2; return 1; }
  apt-get -o DPkg::Lock::Timeout=600 update -qq || return
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${opts[@]}" "$@" >/dev/null
}
