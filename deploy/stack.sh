#!/usr/bin/env bash
# The local Sendstream stack: a throwaway PostgreSQL 15 cluster, ClickHouse
# (Debian's 18.16 package) and the Kafka-protocol broker (`sendstream broker`,
# kfake), all under $SENDSTREAM_DATA_DIR (default <repo>/.run).
#
#   deploy/stack.sh install            install what is missing (apt only)
#   deploy/stack.sh up [--no-broker]   start what is not running, write .run/stack.env
#   deploy/stack.sh down               stop everything (data is kept)
#   deploy/stack.sh env                print .run/stack.env
#   deploy/stack.sh status             exit 0 when Postgres and ClickHouse run
#   deploy/stack.sh clean              down, then delete all data (.run)
#
# Idempotent and quiet on success; `up` is safe to run concurrently (flock).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${SENDSTREAM_DATA_DIR:-$ROOT/.run}
case $DATA in /*) ;; *) DATA=$ROOT/$DATA ;; esac
PGBIN=/usr/lib/postgresql/15/bin
export PATH=/usr/local/go/bin:$PATH:/usr/sbin:/sbin

log() { echo "stack: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# --- helpers ---------------------------------------------------------------

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pid_alive FILE: true when FILE names a live process of ours (clickhouse or
# sendstream; guards against a recycled pid after a reboot).
pid_alive() {
	local pid
	[[ -s $1 ]] || return 1
	pid=$(head -n1 "$1")
	[[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -Eq 'clickhouse|sendstream|broker'
}

# port_for NAME: the port remembered in $DATA/ports/NAME, or a new free one.
port_for() {
	local f=$DATA/ports/$1 p i
	mkdir -p "$DATA/ports"
	if [[ -s $f ]]; then
		cat "$f"
		return
	fi
	for ((i = 0; i < 200; i++)); do
		# Below the kernel's ephemeral range (32768 and up by default): a port
		# there can be taken by an outgoing connection between this check and
		# the server's bind ("Address already in use").
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12700))
		# Skip ports another of our components already took, and busy ones.
		if grep -qx "$p" "$DATA"/ports/* 2>/dev/null || port_open "$p"; then
			continue
		fi
		echo "$p" >"$f"
		echo "$p"
		return
	done
	die "no free port found for $1"
}

# wait_for DESC SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
	local desc=$1 secs=$2 i
	shift 2
	for ((i = 0; i < secs * 10; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# --- install ---------------------------------------------------------------

cmd_install() {
	local pkgs=()
	[[ -x $PGBIN/postgres && -x $PGBIN/initdb ]] || pkgs+=(postgresql-15)
	command -v clickhouse-server >/dev/null 2>&1 || pkgs+=(clickhouse-server)
	command -v clickhouse-client >/dev/null 2>&1 || pkgs+=(clickhouse-client)
	command -v flock >/dev/null 2>&1 || pkgs+=(util-linux)
	command -v setsid >/dev/null 2>&1 || pkgs+=(util-linux)
	command -v curl >/dev/null 2>&1 || pkgs+=(curl)
	command -v gcc >/dev/null 2>&1 || pkgs+=(gcc libc6-dev) # cgo: `go test -race`, libcrypto below
	# libcrypto's headers: DKIM signatures go through OpenSSL (sinks/email/rsasign_cgo.go).
	[[ -f /usr/include/openssl/evp.h ]] || pkgs+=(libssl-dev)
	# Headless browser for the track.js test (ingest/tracking drives it over the DevTools pipe).
	command -v chromium >/dev/null 2>&1 || pkgs+=(chromium)
	((${#pkgs[@]})) || return 0
	local sudo=()
	[[ $(id -u) -eq 0 ]] || sudo=(sudo)
	log "installing ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq >/dev/null
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
	# Debian's packages start system-wide services (PostgreSQL's `main`
	# cluster on 5432, ClickHouse on 9000/8123); we run our own instances, so
	# stop the ones we just installed.
	if command -v service >/dev/null 2>&1; then
		local p
		for p in "${pkgs[@]}"; do
			case $p in
			postgresql-15) "${sudo[@]}" service postgresql stop >/dev/null 2>&1 || true ;;
			clickhouse-server) "${sudo[@]}" service clickhouse-server stop >/dev/null 2>&1 || true ;;
			esac
		done
	fi
}

# --- postgres --------------------------------------------------------------

# PostgreSQL refuses to run as root: when we are root it runs as the
# `postgres` system user (created by Debian's postgresql-common).
pg_user_cmd() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_datadir() {
	# The data directory must be reachable by the postgres user. When the repo
	# sits under a private home (e.g. /root), keep it in /var/tmp and link it.
	local dir=$DATA/pg
	if [[ -L $dir ]]; then
		readlink -f "$dir"
		return
	fi
	if [[ -d $dir ]]; then
		echo "$dir"
		return
	fi
	if [[ $(id -u) -ne 0 ]] || runuser -u postgres -- test -x "$DATA" 2>/dev/null; then
		echo "$dir"
		return
	fi
	local alt
	alt=/var/tmp/sendstream-pg-$(echo -n "$DATA" | cksum | cut -d' ' -f1)
	mkdir -p "$alt"
	ln -sfn "$alt" "$dir"
	echo "$alt"
}

# pg_settings prints the local stack's postgresql.conf settings. Full-page
# images are most of the WAL of the random-access updates (contact activity,
# counters): lz4 compression and a 15-minute checkpoint interval cut the WAL
# each commit waits for. backend_flush_after makes backends (vacuum among
# them) start writing what they evict at once: left to the kernel for 30 s,
# such pages went out in bursts that held every commit's fsync for 20-50 ms.
pg_settings() {
	cat <<-EOF
		# --- sendstream local stack (rewritten by deploy/stack.sh at every start) ---
		listen_addresses = '127.0.0.1'
		unix_socket_directories = ''
		max_connections = 200
		shared_buffers = 256MB
		effective_cache_size = 1GB
		work_mem = 8MB
		maintenance_work_mem = 128MB
		fsync = on
		synchronous_commit = on
		wal_buffers = 16MB
		wal_compression = lz4
		max_wal_size = 2GB
		checkpoint_timeout = 15min
		checkpoint_completion_target = 0.9
		backend_flush_after = 256kB
		logging_collector = off
		log_min_messages = warning
		timezone = 'UTC'
	EOF
}

pg_up() {
	local dir port
	dir=$(pg_datadir)
	port=$(port_for pg)
	mkdir -p "$dir"
	[[ $(id -u) -ne 0 ]] || chown postgres: "$dir"
	chmod 700 "$dir"
	if [[ ! -s $dir/PG_VERSION ]]; then
		pg_user_cmd "$PGBIN/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$DATA/pg-initdb.log" 2>&1 ||
			pg_user_cmd "$PGBIN/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C >"$DATA/pg-initdb.log" 2>&1 ||
			die "initdb failed: see $DATA/pg-initdb.log"
		cat >"$dir/pg_hba.conf" <<-EOF
			host all all 127.0.0.1/32 trust
		EOF
	fi
	# The port and the settings live in includes rewritten at every start, so
	# a data directory made by an older checkout gets today's settings too.
	echo "port = $port" >"$dir/port.conf"
	pg_settings >"$dir/sendstream.conf"
	local inc
	for inc in sendstream.conf port.conf; do
		grep -q "^include_if_exists = '$inc'" "$dir/postgresql.conf" ||
			echo "include_if_exists = '$inc'" >>"$dir/postgresql.conf"
		[[ $(id -u) -ne 0 ]] || chown postgres: "$dir/$inc"
	done

	if ! pg_user_cmd "$PGBIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
		if port_open "$port"; then
			die "postgres port $port is taken by another process (remove $DATA/ports/pg)"
		fi
		pg_user_cmd "$PGBIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null 9>&- ||
			die "postgres did not start: see $dir/server.log"
	else
		pg_user_cmd "$PGBIN/pg_ctl" -D "$dir" reload >/dev/null # settings rewritten above
	fi
	wait_for postgres 60 "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$port" || die "postgres not ready on $port"
	if [[ $("$PGBIN/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
		"SELECT 1 FROM pg_database WHERE datname = 'sendstream'") != 1 ]]; then
		"$PGBIN/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE sendstream" >/dev/null ||
			die "could not create database sendstream"
	fi
	PG_PORT=$port
}

pg_down() {
	local dir=$DATA/pg
	[[ -e $dir/PG_VERSION ]] || return 0
	dir=$(readlink -f "$dir")
	if pg_user_cmd "$PGBIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
		pg_user_cmd "$PGBIN/pg_ctl" -D "$dir" -m fast -w -t 60 stop >/dev/null
	fi
}

# --- clickhouse ------------------------------------------------------------

ch_config() {
	local d=$DATA/ch tcp=$1 http=$2
	mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/format_schemas" "$d/log"
	cat >"$d/users.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by deploy/stack.sh; rewritten on every up. -->
		<yandex>
		  <profiles>
		    <default>
		      <max_memory_usage>2000000000</max_memory_usage>
		      <max_threads>2</max_threads>
		      <use_uncompressed_cache>0</use_uncompressed_cache>
		      <load_balancing>random</load_balancing>
		    </default>
		  </profiles>
		  <users>
		    <default>
		      <password></password>
		      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
		      <profile>default</profile>
		      <quota>default</quota>
		    </default>
		  </users>
		  <quotas>
		    <default>
		      <interval>
		        <duration>3600</duration>
		        <queries>0</queries><errors>0</errors><result_rows>0</result_rows>
		        <read_rows>0</read_rows><execution_time>0</execution_time>
		      </interval>
		    </default>
		  </quotas>
		</yandex>
	EOF
	cat >"$d/config.xml" <<-EOF
		<?xml version="1.0"?>
		<!-- Written by deploy/stack.sh; rewritten on every up. -->
		<yandex>
		  <logger>
		    <level>warning</level>
		    <log>$d/log/clickhouse-server.log</log>
		    <errorlog>$d/log/clickhouse-server.err.log</errorlog>
		    <size>50M</size>
		    <count>2</count>
		  </logger>
		  <listen_host>127.0.0.1</listen_host>
		  <tcp_port>$tcp</tcp_port>
		  <http_port>$http</http_port>
		  <path>$d/data/</path>
		  <tmp_path>$d/tmp/</tmp_path>
		  <user_files_path>$d/user_files/</user_files_path>
		  <format_schema_path>$d/format_schemas/</format_schema_path>
		  <users_config>$d/users.xml</users_config>
		  <default_profile>default</default_profile>
		  <default_database>default</default_database>
		  <timezone>UTC</timezone>
		  <max_connections>1024</max_connections>
		  <keep_alive_timeout>3</keep_alive_timeout>
		  <max_concurrent_queries>100</max_concurrent_queries>
		  <uncompressed_cache_size>268435456</uncompressed_cache_size>
		  <mark_cache_size>268435456</mark_cache_size>
		  <max_table_size_to_drop>0</max_table_size_to_drop>
		  <max_partition_size_to_drop>0</max_partition_size_to_drop>
		  <mlock_executable>false</mlock_executable>
		</yandex>
	EOF
}

ch_ping() { curl -fsS --max-time 2 "http://127.0.0.1:$1/ping" | grep -q Ok; }

ch_up() {
	local d=$DATA/ch tcp http
	tcp=$(port_for ch_tcp)
	http=$(port_for ch_http)
	mkdir -p "$d"
	if ! pid_alive "$d/server.pid" || ! ch_ping "$http"; then
		if pid_alive "$d/server.pid"; then
			# Alive but not answering: give it a moment (start-up after a crash).
			wait_for clickhouse 30 ch_ping "$http" || die "clickhouse pid $(cat "$d/server.pid") does not answer on $http"
		else
			if port_open "$tcp" || port_open "$http"; then
				die "clickhouse port $tcp or $http is taken by another process (remove $DATA/ports/ch_*)"
			fi
			ch_config "$tcp" "$http"
			# 9>&-: the server must not inherit (and so hold) the stack lock.
			# nice 10: ClickHouse's work here (batched inserts, background
			# merges) can wait; on a small machine its merge bursts must not
			# take the CPU from Postgres and the API's latency-bound path.
			setsid nice -n 10 clickhouse-server --config-file="$d/config.xml" </dev/null >>"$d/log/stdout.log" 2>&1 9>&- &
			echo $! >"$d/server.pid"
			wait_for clickhouse 60 ch_ping "$http" ||
				die "clickhouse did not start: see $d/log/clickhouse-server.err.log"
		fi
	fi
	wait_for clickhouse-native 30 clickhouse-client --host 127.0.0.1 --port "$tcp" -q "SELECT 1" ||
		die "clickhouse native port $tcp does not answer"
	clickhouse-client --host 127.0.0.1 --port "$tcp" -q "CREATE DATABASE IF NOT EXISTS sendstream" ||
		die "could not create clickhouse database sendstream"
	CH_TCP=$tcp
}

# stop_pidfile FILE SECONDS: TERM the process, wait, then KILL it.
stop_pidfile() {
	local f=$1 secs=$2 pid i
	pid_alive "$f" || {
		rm -f "$f"
		return 0
	}
	pid=$(head -n1 "$f")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
	rm -f "$f"
}

ch_down() { stop_pidfile "$DATA/ch/server.pid" 30; }

# --- broker ----------------------------------------------------------------

# broker_binary: prints the path of a binary that has the `broker` command:
# bin/sendstream (built when missing) or, while the root package does not
# compile (work in progress), a broker-only build of deploy/broker alone.
broker_binary() {
	if [[ -x $ROOT/bin/sendstream ]]; then
		echo "$ROOT/bin/sendstream"
		return
	fi
	if (cd "$ROOT" && go build -o bin/sendstream .) >"$DATA/build.log" 2>&1; then
		echo "$ROOT/bin/sendstream"
		return
	fi
	log "go build . failed (see $DATA/build.log); building the broker from deploy/broker alone"
	local tmp f
	tmp=$(mktemp -d)
	cat >"$tmp/main.go" <<-'EOF'
		package main

		import (
			"fmt"
			"os"

			"sendstream/deploy/broker"
		)

		func main() {
			if len(os.Args) < 2 || os.Args[1] != "broker" {
				fmt.Fprintln(os.Stderr, "broker-only build: usage: broker --data-dir DIR --listen ADDR")
				os.Exit(2)
			}
			if err := broker.Run(os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	EOF
	{
		printf '{"Replace":{"%s":"%s"' "$ROOT/zz_stack_broker_main.go" "$tmp/main.go"
		for f in "$ROOT"/*.go; do
			[[ $f == *_test.go ]] && continue
			printf ',"%s":""' "$f"
		done
		printf '}}\n'
	} >"$tmp/overlay.json"
	mkdir -p "$DATA/bin"
	(cd "$ROOT" && go build -overlay "$tmp/overlay.json" -o "$DATA/bin/sendstream-broker" .) >>"$DATA/build.log" 2>&1 ||
		die "cannot build the broker: see $DATA/build.log"
	rm -rf "$tmp"
	echo "$DATA/bin/sendstream-broker"
}

# broker_running: true (and KAFKA_PORT set) when the broker of $DATA/kafka
# runs and answers, whoever started it (this script or `sendstream serve`).
broker_running() {
	local d=$DATA/kafka addr
	pid_alive "$d/broker.pid" || return 1
	[[ -s $d/broker.addr ]] || wait_for broker 30 test -s "$d/broker.addr" || return 1
	addr=$(head -n1 "$d/broker.addr")
	wait_for broker 30 port_open "${addr##*:}" || return 1
	KAFKA_PORT=${addr##*:}
}

broker_up() {
	local d=$DATA/kafka port
	mkdir -p "$d"
	broker_running && return
	stop_pidfile "$d/broker.pid" 10
	rm -f "$d/broker.addr"
	port=$(port_for kafka)
	port_open "$port" && die "broker port $port is taken by another process (remove $DATA/ports/kafka)"
	local bin
	bin=$(broker_binary)
	setsid "$bin" broker --data-dir "$d" --listen "127.0.0.1:$port" \
		</dev/null >>"$d/broker.log" 2>&1 9>&- &
	echo $! >"$d/broker.pid"
	wait_for broker 60 port_open "$port" || die "broker did not start: see $d/broker.log"
	KAFKA_PORT=$port
}

broker_down() { stop_pidfile "$DATA/kafka/broker.pid" 30; }

# --- commands --------------------------------------------------------------

write_env() {
	local tmp=$DATA/stack.env.tmp.$$
	{
		echo "SENDSTREAM_POSTGRES_URL=postgres://postgres@127.0.0.1:$PG_PORT/sendstream?sslmode=disable"
		echo "SENDSTREAM_CLICKHOUSE_ADDR=127.0.0.1:$CH_TCP"
		echo "SENDSTREAM_CLICKHOUSE_DB=sendstream"
		if [[ -n ${KAFKA_PORT:-} ]]; then
			echo "SENDSTREAM_KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT"
		fi
	} >"$tmp"
	mv -f "$tmp" "$DATA/stack.env"
}

with_lock() {
	mkdir -p "$DATA"
	exec 9>"$DATA/stack.lock"
	flock 9
}

cmd_up() {
	local broker=1
	for a in "$@"; do
		case $a in
		--no-broker) broker=0 ;;
		*) die "unknown flag for up: $a" ;;
		esac
	done
	with_lock
	pg_up
	ch_up
	KAFKA_PORT=
	if ((broker)); then
		broker_up
	else
		# A broker from an earlier `up` (or serve) still serving stays advertised.
		broker_running || KAFKA_PORT=
	fi
	write_env
}

cmd_down() {
	with_lock
	broker_down
	ch_down
	pg_down
}

cmd_status() {
	local dir=$DATA/pg
	[[ -e $dir/PG_VERSION ]] || return 1
	pg_user_cmd "$PGBIN/pg_ctl" -D "$(readlink -f "$dir")" status >/dev/null 2>&1 || return 1
	pid_alive "$DATA/ch/server.pid" || return 1
}

cmd_clean() {
	cmd_down
	if [[ -L $DATA/pg ]]; then
		rm -rf "$(readlink -f "$DATA/pg")"
	fi
	rm -rf "$DATA"
}

cmd_env() {
	[[ -s $DATA/stack.env ]] || die "no $DATA/stack.env: run deploy/stack.sh up"
	cat "$DATA/stack.env"
}

case ${1:-} in
install) cmd_install ;;
up)
	shift
	cmd_up "$@"
	;;
down) cmd_down ;;
env) cmd_env ;;
status) cmd_status ;;
clean) cmd_clean ;;
*)
	echo "usage: $0 install|up [--no-broker]|down|env|status|clean" >&2
	exit 2
	;;
esac
