"""topology.py - Redis topologies for the integration suite, real processes
on free loopback ports:

- SentinelSet: one primary, two replicas (--replicaof) and three
  redis-sentinel processes monitoring them as "mymaster";
- RedisCluster: three masters and three replicas made into a Redis Cluster
  with `redis-cli --cluster create`. It stands in for a harness.RedisServer
  (run.py --redis-mode cluster): .port, command() routed by key slot,
  keys(), lock_keys(), INFO commandstats summed over the masters, alive(),
  stop(), kill(), pause(), restart_empty().

Every process is started with harness.spawn and stopped by PID (a node's
stop()/kill(), or harness.stop_all() whatever happens to a test); their
directories are under harness.tmp_root(). A missing redis-server,
redis-sentinel or redis-cli is a SetupError, never a skip.
"""

import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time

import harness
import origins
from harness import (RedisAcl, RedisServer, RespClient, RespError,
                     SetupError, file_tail, free_port, slack, spawn,
                     wait_until)

# ---------------------------------------------------------------------------
# key slots (the CRC16 of Redis Cluster: XMODEM, polynomial 0x1021)


def _crc16_table():
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC16 = _crc16_table()
SLOTS = 16384


def crc16(data):
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc


def keyslot(key):
    """The cluster slot of a key, hash tags included: the bytes between the
    first '{' and the first '}' after it, when there are any."""
    if isinstance(key, str):
        key = key.encode()
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            key = key[s + 1:e]
    return crc16(key) % SLOTS


def lock_slot(name):
    """The slot of every key of lock `name` (they all carry {name})."""
    return keyslot("{%s}" % name)


# ---------------------------------------------------------------------------
# tools


def _tool(name, env):
    exe = os.environ.get(env) or shutil.which(name)
    if not exe or not os.access(exe, os.X_OK):
        raise SetupError("%s not found (install it, or set %s): the "
                         "topology tests cannot run" % (name, env))
    return exe


def redis_cli(args, timeout, what):
    """Runs redis-cli (registered with harness so a watchdog kill reaches
    it); returns its output; a failure or a timeout is a SetupError."""
    exe = _tool("redis-cli", "FG_REDIS_CLI")
    d = tempfile.mkdtemp(prefix="redis-cli-", dir=harness.tmp_root())
    out = os.path.join(d, "out.txt")
    with open(out, "wb") as f:
        p = spawn([exe] + list(args), stdout=f, stderr=subprocess.STDOUT,
                  cwd=d)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        harness.kill_process(p)
        raise SetupError("%s: redis-cli did not finish within %.0f s:\n%s"
                         % (what, timeout, file_tail(out)))
    harness.stop_process(p)       # reaped already; drops it from the registry
    with open(out, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    if p.returncode != 0 or "[ERR]" in text:
        raise SetupError("%s: redis-cli %s exited %s:\n%s"
                         % (what, " ".join(args[:2]), p.returncode,
                            "\n".join(text.splitlines()[-30:])))
    return text


def parse_info(text):
    """INFO text -> {field: value} (values as strings)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, _, v = line.partition(":")
            out[k.strip()] = v.strip()
    return out


def node_command(port, *args, timeout=2.0):
    with RespClient(port, timeout=timeout) as c:
        return c.command(*args)


def node_info(port, section, timeout=2.0):
    return parse_info(node_command(port, "INFO", section, timeout=timeout))


# ---------------------------------------------------------------------------
# Sentinel


class SentinelNode(harness.Process):
    """One redis-sentinel on a free loopback port, with a writable config
    file of its own (Sentinel rewrites it). With `acl` (a RedisAcl) its
    users are those, `default` off, and it logs in to the Redis nodes and
    to the other Sentinels as the harness's admin."""

    def __init__(self, master_name, master_port, quorum=2,
                 down_after_ms=1000, failover_timeout_ms=3000, acl=None):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="sentinel-", dir=harness.tmp_root())
        self.conf = os.path.join(self.dir, "sentinel.conf")
        self.logpath = os.path.join(self.dir, "sentinel.log")
        self.proc = None
        with open(self.conf, "w") as f:
            f.write("port %d\n"
                    "bind 127.0.0.1\n"
                    "daemonize no\n"
                    "dir %s\n"
                    "sentinel resolve-hostnames no\n"
                    "sentinel monitor %s 127.0.0.1 %d %d\n"
                    "sentinel down-after-milliseconds %s %d\n"
                    "sentinel failover-timeout %s %d\n"
                    "sentinel parallel-syncs %s 2\n"
                    % (self.port, self.dir, master_name, master_port, quorum,
                       master_name, down_after_ms, master_name,
                       failover_timeout_ms, master_name))
            if acl is not None:
                acl.register(self.port)
                f.write("".join(line + "\n" for line in acl.lines()))
                f.write("sentinel auth-user %s %s\n"
                        "sentinel auth-pass %s %s\n"
                        "sentinel sentinel-user %s\n"
                        "sentinel sentinel-pass %s\n"
                        % (master_name, RedisAcl.ADMIN, master_name,
                           RedisAcl.ADMIN_PASSWORD, RedisAcl.ADMIN,
                           RedisAcl.ADMIN_PASSWORD))

    def start(self, timeout=10.0):
        exe = _tool("redis-sentinel", "FG_REDIS_SENTINEL")
        with open(self.logpath, "ab") as log:
            self.proc = spawn([exe, self.conf], stdout=log,
                              stderr=subprocess.STDOUT, cwd=self.dir)
        if not wait_until(self.ping, timeout, 0.02):
            raise SetupError("redis-sentinel on port %d did not answer PING "
                             "(exit %s):\n%s" % (self.port, self.proc.poll(),
                                                 file_tail(self.logpath)))
        return self

    def ping(self):
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            return node_command(self.port, "PING", timeout=1.0) == "PONG"
        except (OSError, RespError):
            return False

    def command(self, *args):
        return node_command(self.port, *args)


class MasterWatch:
    """Asks every sentinel for the master's address every 50 ms, in a
    thread, and keeps when each sentinel's answer last changed. Sentinels
    may switch twice after one loss (two leaders in two epochs, the later
    one winning); a grant taken on the first new master is then as lost as
    one taken on the killed master, so a test bounds lost grants by the
    last switch it saw, not by the first."""

    def __init__(self, sset):
        self.sset = sset
        self.changes = []       # (monotonic time, sentinel port, master port)
        self._last = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._look()
        self._thread.start()
        return self

    def _look(self):
        for s in self.sset.sentinels:
            if not s.alive():
                continue
            try:
                addr = s.command("SENTINEL", "get-master-addr-by-name",
                                 self.sset.name)
                port = int(addr[1])
            except (OSError, RespError, TypeError, IndexError, ValueError):
                continue
            if self._last.get(s.port) != port:
                if s.port in self._last:
                    self.changes.append((time.monotonic(), s.port, port))
                self._last[s.port] = port

    def _run(self):
        while not self._stop.wait(0.05):
            self._look()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5.0)
        return self

    def last_change(self, default):
        return max((t for t, _, _ in self.changes), default=default)

    def masters(self):
        """The distinct masters named, in the order they were first named."""
        seen = []
        for _, _, port in self.changes:
            if port not in seen:
                seen.append(port)
        return seen


class SentinelSet:
    """A primary, two replicas and three sentinels (quorum 2) watching them
    as `name`. Nodes are harness.RedisServer objects in self.nodes (the
    primary first, as started); the current roles are asked of Redis.
    `acl` (RedisAcl) gives every Redis node its users, `sentinel_acl` every
    Sentinel."""

    def __init__(self, name="mymaster", down_after_ms=1000,
                 failover_timeout_ms=3000, acl=None, sentinel_acl=None):
        self.name = name
        self.down_after_ms = down_after_ms
        primary = RedisServer(acl=acl)
        self.nodes = [primary] + [
            RedisServer(extra_args=["--replicaof", "127.0.0.1",
                                    str(primary.port)], acl=acl)
            for _ in range(2)]
        for n in self.nodes:
            # replicas sync at once, not after the default 5 s
            n.extra_args += ["--repl-diskless-sync-delay", "0"]
        self.sentinels = [SentinelNode(name, primary.port,
                                       down_after_ms=down_after_ms,
                                       failover_timeout_ms=failover_timeout_ms,
                                       acl=sentinel_acl)
                          for _ in range(3)]

    def url(self, scheme="redis-sentinel"):
        return "%s://%s/%s" % (scheme, ",".join(
            "127.0.0.1:%d" % s.port for s in self.sentinels), self.name)

    def start(self, timeout=None):
        timeout = timeout or slack(30.0)
        try:
            for n in self.nodes:
                n.start()
            self.wait_replicas_synced(self.nodes[0], timeout)
            for s in self.sentinels:
                s.start()
            self.wait_sentinels_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    # -- what the sentinels know -------------------------------------------

    def sentinel_command(self, *args):
        """Asks the first sentinel that answers."""
        last = None
        for s in self.sentinels:
            if not s.alive():
                continue
            try:
                return s.command(*args)
            except (OSError, RespError) as e:
                last = e
        raise SetupError("no sentinel answered %r: %r" % (args, last))

    def master_port(self):
        """The master's port, as a sentinel tells it."""
        addr = self.sentinel_command("SENTINEL", "get-master-addr-by-name",
                                     self.name)
        return int(addr[1])

    def watch_master(self):
        """A MasterWatch over this set's sentinels, started."""
        return MasterWatch(self).start()

    def _sentinel_view(self, s):
        fields = s.command("SENTINEL", "master", self.name)
        return {k.decode(): v.decode() for k, v in zip(fields[::2],
                                                       fields[1::2])}

    def wait_sentinels_ready(self, timeout):
        """Every sentinel sees the master up, both replicas and the two
        other sentinels: only then can a failover be agreed on."""
        last = {}

        def ready():
            for s in self.sentinels:
                try:
                    v = self._sentinel_view(s)
                except (OSError, RespError) as e:
                    last["v"] = repr(e)
                    return False
                last["v"] = v
                if v.get("num-slaves") != "2" or \
                        v.get("num-other-sentinels") != "2" or \
                        "down" in v.get("flags", ""):
                    return False
            return True
        if not wait_until(ready, timeout, 0.1):
            raise SetupError("the sentinels did not get ready within %.0f s "
                             "(last view %r)" % (timeout, last.get("v")))

    def wait_replicas_synced(self, master, timeout, count=2):
        def synced():
            try:
                info = node_info(master.port, "replication")
            except (OSError, RespError):
                return False
            n = 0
            for k, v in info.items():
                if re.match(r"slave\d+$", k) and "state=online" in v:
                    n += 1
            return n >= count
        if not wait_until(synced, timeout, 0.05):
            raise SetupError("replicas of port %d did not sync within %.0f s"
                             % (master.port, timeout))

    # -- nodes --------------------------------------------------------------

    def node(self, port):
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(port)

    def master_node(self):
        return self.node(self.master_port())

    def replica_nodes(self):
        """The nodes other than the current master."""
        m = self.master_port()
        return [n for n in self.nodes if n.port != m]

    def role(self, node):
        """ROLE of a node ("master", "slave") or None if it cannot answer."""
        try:
            return node_command(node.port, "ROLE", timeout=1.0)[0].decode()
        except (OSError, RespError, IndexError):
            return None

    def kill_primary(self):
        """SIGKILLs the current master; returns its node."""
        n = self.master_node()
        n.kill()
        return n

    def wait_new_master(self, old_port, timeout):
        """Waits until the sentinels name a master other than `old_port`
        and that node answers ROLE as a master; returns its port."""
        def moved():
            try:
                p = self.master_port()
            except SetupError:
                return None
            if p == old_port:
                return None
            return p if self.role(self.node(p)) == "master" else None
        p = wait_until(moved, timeout, 0.05)
        if not p:
            raise AssertionError("no new master within %.1f s of losing "
                                 "port %d" % (timeout, old_port))
        return p

    def restart_node(self, node):
        """Starts a node again on its port, empty (no persistence); the
        sentinels make it a replica of the current master."""
        node.start()
        return node

    def pause_replicas(self):
        rs = self.replica_nodes()
        for n in rs:
            n.pause()
        return rs

    def resume(self, nodes):
        for n in nodes:
            n.resume()

    def alive(self):
        return all(n.alive() for n in self.nodes + self.sentinels)

    def stop(self):
        for s in self.sentinels:
            s.stop()
        for n in self.nodes:
            n.stop()


# ---------------------------------------------------------------------------
# Cluster


class ClusterNode(RedisServer):
    """A cluster-enabled redis-server; its cluster bus port is a free port
    of its own (cluster-port), and nodes.conf lives in its directory."""

    def __init__(self, port=None, bus_port=None, node_timeout_ms=1000,
                 acl=None):
        self.bus_port = bus_port or free_port()
        self.node_timeout_ms = node_timeout_ms
        super().__init__(port, acl=acl, extra_args=[
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--cluster-port", str(self.bus_port),
            # a failed master makes only its own slots unavailable
            "--cluster-require-full-coverage", "no",
            # replicas sync at once, not after the default 5 s
            "--repl-diskless-sync-delay", "0"])

    def node_id(self):
        return node_command(self.port, "CLUSTER", "MYID").decode()

    def fresh(self):
        """A new, empty node on the same ports (a new directory)."""
        return ClusterNode(self.port, self.bus_port, self.node_timeout_ms,
                           self.acl)


# Commands whose first key is not args[1].
_SCRIPT_CMDS = {"FCALL", "FCALL_RO", "EVAL", "EVALSHA", "EVAL_RO",
                "EVALSHA_RO"}
_FIRST_KEY_CMDS = {
    "GET", "SET", "DEL", "UNLINK", "EXISTS", "TYPE", "TTL", "PTTL",
    "EXPIRE", "PEXPIRE", "PERSIST", "INCR", "HGET", "HSET", "HDEL",
    "HGETALL", "HMGET", "HLEN", "HKEYS", "HEXISTS", "HINCRBY", "ZCARD",
    "ZRANGE", "ZRANGEBYSCORE", "ZSCORE", "ZADD", "ZREM", "LLEN", "LRANGE",
    "STRLEN", "OBJECT", "DUMP"}


class RedisCluster:
    """Three masters, three replicas, made a cluster by redis-cli. Usable
    where the suite uses a RedisServer: .port (a seed; gateways given this
    port by a test are pointed at url()), command(), keys(), lock_keys(),
    alive(), stop(), kill(), pause()/resume(), start(), restart_empty().
    `acl` (RedisAcl) gives every node its users."""

    def __init__(self, masters=3, replicas=1, node_timeout_ms=1000,
                 acl=None):
        self.n_masters = masters
        self.n_replicas = replicas
        self.acl = acl
        self.nodes = [ClusterNode(node_timeout_ms=node_timeout_ms, acl=acl)
                      for _ in range(masters * (1 + replicas))]
        self.port = self.nodes[0].port
        harness.register_redis_url(self.port, self.url())
        self._owner = [None] * SLOTS       # slot -> port, from CLUSTER SLOTS
        self._map_lock = threading.Lock()
        self._killed = None                # (node, its slots, monotonic time)

    def url(self, scheme="redis-cluster"):
        return "%s://%s" % (scheme, ",".join(
            "127.0.0.1:%d" % n.port for n in self.nodes))

    # -- life ---------------------------------------------------------------

    def start(self, timeout=None):
        timeout = timeout or slack(30.0)
        try:
            for n in self.nodes:
                n.start()
            redis_cli(["--cluster", "create"] +
                      ["127.0.0.1:%d" % n.port for n in self.nodes] +
                      ["--cluster-replicas", str(self.n_replicas),
                       "--cluster-yes"] + self._cli_login(), timeout,
                      "cluster create")
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _cli_login(self):
        if self.acl is None:
            return []
        return ["--user", RedisAcl.ADMIN, "--pass", RedisAcl.ADMIN_PASSWORD,
                "--no-auth-warning"]

    def live_nodes(self):
        return [n for n in self.nodes if n.alive()]

    def alive(self):
        return all(n.alive() for n in self.nodes)

    def ping(self):
        return all(n.ping() for n in self.nodes)

    def stop(self):
        for n in self.nodes:
            n.stop()

    def kill(self):
        """SIGKILLs every node (Redis is gone, as far as a gateway can
        tell)."""
        for n in self.nodes:
            n.kill()

    def pause(self):
        for n in self.nodes:
            n.pause()

    def resume(self):
        for n in self.nodes:
            n.resume()

    def restart_empty(self):
        """Kills every node and makes a new, empty cluster on the same
        ports (the gateways' seeds stay right). Returns self."""
        self.kill()
        self.nodes = [n.fresh() for n in self.nodes]
        with self._map_lock:
            self._owner = [None] * SLOTS
        self._killed = None
        return self.start()

    # -- the cluster's own view --------------------------------------------

    def _slots_from(self, port):
        """[(start, end, master port, [replica ports])] from CLUSTER SLOTS
        of one node."""
        out = []
        for r in node_command(port, "CLUSTER", "SLOTS"):
            out.append((r[0], r[1], r[2][1], [x[1] for x in r[3:]]))
        return sorted(out)

    def refresh_slots(self):
        for n in self.live_nodes():
            try:
                ranges = self._slots_from(n.port)
            except (OSError, RespError):
                continue
            owner = [None] * SLOTS
            for a, b, port, _ in ranges:
                for s in range(a, b + 1):
                    owner[s] = port
            with self._map_lock:
                self._owner = owner
            return ranges
        raise SetupError("no cluster node answers CLUSTER SLOTS")

    def wait_ok(self, timeout):
        """Every live node says cluster_state:ok with all slots served, they
        all agree on who owns what, every owner is alive, every master has
        its replicas, and every live replica's link to its master is up."""
        last = {}

        def ok():
            views = []
            for n in self.live_nodes():
                try:
                    info = parse_info(node_command(n.port, "CLUSTER", "INFO"))
                    if info.get("cluster_state") != "ok" or \
                            info.get("cluster_slots_ok") != str(SLOTS):
                        last["why"] = "port %d: %r" % (n.port, info)
                        return False
                    views.append(self._slots_from(n.port))
                except (OSError, RespError) as e:
                    last["why"] = "port %d: %r" % (n.port, e)
                    return False
            if any(v != views[0] for v in views):
                last["why"] = "the nodes disagree on the slot map"
                return False
            live = {n.port for n in self.live_nodes()}
            masters = {m for _, _, m, _ in views[0]}
            if len(masters) != self.n_masters or not masters <= live:
                last["why"] = "masters %r (live %r)" % (masters, live)
                return False
            for n in self.live_nodes():
                if n.port in masters:
                    continue
                try:
                    r = parse_info(node_command(n.port, "INFO",
                                                "replication"))
                except (OSError, RespError) as e:
                    last["why"] = "port %d: %r" % (n.port, e)
                    return False
                if r.get("role") != "slave" or \
                        r.get("master_link_status") != "up" or \
                        int(r.get("master_port", 0)) not in masters:
                    last["why"] = "replica %d: %r" % (n.port, r)
                    return False
            return True
        if not wait_until(ok, timeout, 0.05):
            raise SetupError("the cluster did not become ok within %.0f s: "
                             "%s" % (timeout, last.get("why")))
        self.refresh_slots()

    def masters(self):
        """The nodes serving slots, in the order of self.nodes."""
        ports = {port for _, _, port, _ in self.refresh_slots()}
        return [n for n in self.nodes if n.port in ports]

    def replicas_of(self, master):
        """The live nodes replicating `master`, each as it says itself (INFO
        replication). Another node's CLUSTER NODES can lag the gossip that
        tells it of a replica, and CLUSTER SLOTS leaves a replica out until
        its offset has been gossiped; the replica's own view is what
        wait_ok() already waited for."""
        out = []
        for n in self.live_nodes():
            if n is master:
                continue
            try:
                r = node_info(n.port, "replication")
            except (OSError, RespError):
                continue
            if r.get("role") == "slave" and \
                    int(r.get("master_port", 0)) == master.port:
                out.append(n)
        return out

    def slots_of(self, node):
        """Every slot `node` serves, sorted."""
        out = []
        for a, b, port, _ in self.refresh_slots():
            if port == node.port:
                out += range(a, b + 1)
        return out

    def node(self, port):
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(port)

    def owner_of(self, name):
        """The node serving lock `name`'s slot now."""
        self.refresh_slots()
        with self._map_lock:
            return self.node(self._owner[lock_slot(name)])

    # -- changes ------------------------------------------------------------

    def reshard(self, n_slots, from_node, to_node, timeout=None):
        """Moves n_slots slots (with their keys) from one master to another
        with `redis-cli --cluster reshard`; masters are nodes or indexes in
        masters(). Returns the seconds it took."""
        ms = self.masters()
        src = ms[from_node] if isinstance(from_node, int) else from_node
        dst = ms[to_node] if isinstance(to_node, int) else to_node
        t0 = time.monotonic()
        redis_cli(["--cluster", "reshard", "127.0.0.1:%d" % src.port,
                   "--cluster-from", src.node_id(),
                   "--cluster-to", dst.node_id(),
                   "--cluster-slots", str(n_slots), "--cluster-yes"],
                  timeout or slack(120.0), "cluster reshard")
        dt = time.monotonic() - t0
        self.wait_ok(slack(20.0))
        return dt

    def kill_master(self, i):
        """SIGKILLs masters()[i]; returns the node. wait_failover() then
        waits for one of its replicas to take over."""
        node = self.masters()[i]
        slots = self.slots_of(node)
        node.kill()
        self._killed = (node, slots, time.monotonic())
        return node

    def wait_failover(self, timeout):
        """Waits until the killed master's slots are served by a live node
        and the live cluster is ok again; returns the seconds since the
        kill."""
        if self._killed is None:
            raise AssertionError("wait_failover() without kill_master()")
        node, slots, t_kill = self._killed
        last = {}

        def taken_over():
            for n in self.live_nodes():
                try:
                    ranges = self._slots_from(n.port)
                except (OSError, RespError) as e:
                    last["why"] = repr(e)
                    return False
                owner = None
                for a, b, port, _ in ranges:
                    if a <= slots[0] <= b:
                        owner = port
                if owner == node.port or not owner:
                    last["why"] = "port %d still names %r" % (n.port, owner)
                    return False
            return True
        if not wait_until(taken_over, timeout, 0.02):
            raise AssertionError("no replica took over the slots of port %d "
                                 "within %.1f s (%s)"
                                 % (node.port, timeout, last.get("why")))
        dt = time.monotonic() - t_kill
        # the cluster counts one master less until the old one comes back
        # as a replica; the slot map is complete again
        self.refresh_slots()
        return dt

    def restart_node(self, node):
        """Starts a killed node again with its nodes.conf: it rejoins as a
        replica of whoever took its slots."""
        node.start()
        return node

    # -- commands -----------------------------------------------------------

    def _first_key(self, args):
        name = str(args[0]).upper()
        if name in _SCRIPT_CMDS:
            return args[3] if len(args) > 3 and int(args[2]) > 0 else None
        if name in _FIRST_KEY_CMDS:
            return args[1] if len(args) > 1 else None
        for n in self.live_nodes():
            try:
                keys = node_command(n.port, "COMMAND", "GETKEYS", *args)
            except RespError:
                return None
            except OSError:
                continue
            return keys[0] if keys else None
        raise SetupError("no cluster node answers")

    def _masters_ports(self):
        self.refresh_slots()
        with self._map_lock:
            return sorted({p for p in self._owner if p is not None})

    def _on_masters(self, *args):
        return [(p, node_command(p, *args)) for p in self._masters_ports()]

    def command(self, *args):
        """A command as if the cluster were one Redis: a keyed command goes
        to the node owning its first key's slot (MOVED, ASK and TRYAGAIN
        followed); the keyless ones the suite uses are answered for the
        whole cluster (see _keyless)."""
        key = self._first_key(args)
        if key is None:
            return self._keyless(args)
        return self._routed(keyslot(key), args)

    def _routed(self, slot, args):
        target, asking, last = None, False, None
        for attempt in range(20):
            if target is None:
                with self._map_lock:
                    target = self._owner[slot]
                if target is None:
                    self.refresh_slots()
                    with self._map_lock:
                        target = self._owner[slot]
            try:
                with RespClient(target) as c:
                    if asking:
                        c.command("ASKING")
                    return c.command(*args)
            except RespError as e:
                last = e
                msg = str(e)
                if msg.startswith("MOVED "):
                    target = int(msg.split()[2].rsplit(":", 1)[1])
                    asking = False
                    with self._map_lock:
                        self._owner[slot] = target
                    continue
                if msg.startswith("ASK "):
                    target = int(msg.split()[2].rsplit(":", 1)[1])
                    asking = True
                    continue
                if msg.startswith(("TRYAGAIN", "CLUSTERDOWN")):
                    time.sleep(0.05)
                    target, asking = None, False
                    continue
                raise
            except OSError as e:
                last = e
                time.sleep(0.05)
                self.refresh_slots()
                target, asking = None, False
        raise SetupError("cluster command %r: no answer after 20 tries: %r"
                         % (args[:2], last))

    def _keyless(self, args):
        name = str(args[0]).upper()
        sub = str(args[1]).upper() if len(args) > 1 else ""
        if name == "KEYS":
            out = []
            for _, keys in self._on_masters(*args):
                out += keys
            return out
        if name == "DBSIZE":
            return sum(v for _, v in self._on_masters(*args))
        if name in ("FLUSHALL", "FLUSHDB", "SCRIPT") or \
                (name == "FUNCTION" and sub != "LIST"):
            return self._on_masters(*args)[0][1]
        if name == "FUNCTION" and sub == "LIST":
            seen, out = set(), []
            for _, libs in self._on_masters(*args):
                for lib in libs:
                    fields = dict(zip(lib[::2], lib[1::2]))
                    if fields[b"library_name"] not in seen:
                        seen.add(fields[b"library_name"])
                        out.append(lib)
            return out
        if name == "INFO" and sub == "COMMANDSTATS":
            return self.commandstats_text()
        if name in ("PING", "TIME", "PUBLISH"):
            return node_command(self._masters_ports()[0], *args)
        raise RespError("RedisCluster: %s %s is per node; ask a node "
                        "(cluster.nodes[i].command) instead"
                        % (name, sub))

    def commandstats(self, nodes=None):
        """{command: {field: number}} summed over the masters (or `nodes`)."""
        ports = [n.port for n in nodes] if nodes else self._masters_ports()
        total = {}
        for p in ports:
            info = node_command(p, "INFO", "commandstats").decode()
            for line in info.splitlines():
                m = re.match(r"cmdstat_([^:]+):(.*)$", line.strip())
                if not m:
                    continue
                d = total.setdefault(m.group(1), {})
                for kv in m.group(2).split(","):
                    k, _, v = kv.partition("=")
                    if k in ("calls", "usec", "rejected_calls",
                             "failed_calls"):
                        d[k] = d.get(k, 0) + int(v)
        return total

    def commandstats_text(self):
        """INFO commandstats as one Redis would write it, summed over the
        masters."""
        lines = ["# Commandstats"]
        for cmd, d in sorted(self.commandstats().items()):
            calls = d.get("calls", 0)
            lines.append("cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,"
                         "rejected_calls=%d,failed_calls=%d"
                         % (cmd, calls, d.get("usec", 0),
                            d.get("usec", 0) / calls if calls else 0.0,
                            d.get("rejected_calls", 0),
                            d.get("failed_calls", 0)))
        return ("\r\n".join(lines) + "\r\n").encode()

    def keys(self, pattern):
        return sorted(k.decode("utf-8", "replace")
                      for k in self.command("KEYS", pattern))

    def lock_keys(self, name):
        return self.keys("*{" + harness.glob_escape(name) + "}*")

    def per_node(self, *args):
        """[(node, reply)] of a command sent to every master."""
        return [(self.node(p), r) for p, r in self._on_masters(*args)]


# ---------------------------------------------------------------------------
# load: acquire / fenced write / release cycles, every answer recorded


class Op:
    """One request of the load and its answer."""
    __slots__ = ("kind", "name", "gw", "t_sent", "t_recv", "status", "code",
                 "token", "grant_sent", "detail")

    def __init__(self, kind, name, gw, grant_sent=None, token=None):
        self.kind, self.name, self.gw = kind, name, gw
        self.grant_sent, self.token = grant_sent, token
        self.t_sent = self.t_recv = self.status = self.code = None
        self.detail = None

    def __repr__(self):
        return "<%s %s via :%d at %.3f-%.3f: %s %s token %s %s>" % (
            self.kind, self.name, self.gw, self.t_sent, self.t_recv or -1,
            self.status, self.code, self.token, self.detail or "")


class LockLoad:
    """Worker threads, each looping: acquire a lock (one of `names`, on
    one gateway), PUT /<name> with its sequencer (through the next
    gateway), release it (first gateway). Every answer is kept as an Op."""

    def __init__(self, gateways, names, threads=4, ttl_ms=5000, wait_ms=300,
                 write=True, timeout=None):
        self.gateways = list(gateways)
        self.names = list(names)
        self.n_threads = threads
        self.ttl_ms, self.wait_ms, self.write = ttl_ms, wait_ms, write
        self.timeout = timeout or slack(10.0)
        self.ops = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []

    def start(self):
        for i in range(self.n_threads):
            t = threading.Thread(target=self._work, args=(i,), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout + slack(5.0))
        stuck = [t for t in self._threads if t.is_alive()]
        if stuck:
            raise AssertionError("%d load threads did not stop" % len(stuck))

    def _request(self, op, gw, method, path, **kw):
        op.t_sent = time.monotonic()
        try:
            r = harness.http_request(gw.port, method, path,
                                     timeout=self.timeout, **kw)
        except Exception as e:        # judged by the checks
            op.t_recv = time.monotonic()
            op.detail = repr(e)
            r = None
        else:
            op.t_recv = time.monotonic()
            op.status = r.status
            try:
                body = json.loads(r.body) if r.body[:1] == b"{" else None
            except ValueError:
                body = None
            if isinstance(body, dict):
                op.code = body.get("error")
            if r.status == 503 and r.header("Retry-After") is None:
                op.detail = "503 without Retry-After"
        with self._lock:
            self.ops.append(op)
        return r

    def _work(self, i):
        rnd = random.Random(i)
        k = i
        while not self._stop.is_set():
            name = rnd.choice(self.names)
            ga = self.gateways[k % len(self.gateways)]
            gb = self.gateways[(k + 1) % len(self.gateways)]
            k += 1
            op = Op("acquire", name, ga.port)
            r = self._request(op, ga, "POST", harness.LOCKS + name,
                              body={"ttl_ms": self.ttl_ms,
                                    "wait_ms": self.wait_ms})
            if r is None or r.status != 200:
                if r is not None and r.status == 503:
                    time.sleep(0.05)
                continue
            try:
                g = r.json
                op.token = g["token"]
                bad = _bad_grant(g, name)
            except (AssertionError, KeyError, TypeError) as e:
                bad = "not a grant: %r (%r)" % (r, e)
            if bad:
                op.detail = bad
                continue
            if self.write:
                w = Op("write", name, gb.port, op.t_sent, g["token"])
                self._request(w, gb, "PUT", "/" + name,
                              raw=("%s %d" % (name, g["token"])).encode(),
                              headers={"Fencing-Token": g["sequencer"]})
            rel = Op("release", name, ga.port, op.t_sent, g["token"])
            self._request(rel, ga, "DELETE", harness.LOCKS + name,
                          headers={"Fence-Lease": g["lease"]})

    # -- what happened ------------------------------------------------------

    def snapshot(self):
        with self._lock:
            return list(self.ops)

    def grants(self):
        return [o for o in self.snapshot()
                if o.kind == "acquire" and o.status == 200]

    def unavailable(self, since, names=None):
        """The 503 answers to requests that ended after `since` (of `names`
        only, if given)."""
        return [o for o in self.snapshot() if o.status == 503 and
                o.t_recv >= since and (names is None or o.name in names)]

    def successes_after(self, t, gw_port=None):
        return [o for o in self.snapshot() if o.t_sent >= t and
                (gw_port is None or o.gw == gw_port) and
                ((o.kind == "acquire" and o.status == 200) or
                 (o.kind == "write" and o.status == 200) or
                 (o.kind == "release" and o.status == 204))]


def _bad_grant(g, name):
    if not isinstance(g, dict):
        return "grant is not an object"
    if g.get("name") != name:
        return "grant names %r, not %r" % (g.get("name"), name)
    t = g.get("token")
    if not isinstance(t, int) or isinstance(t, bool) or not 0 < t < 2 ** 53:
        return "bad token %r" % (t,)
    if not isinstance(g.get("lease"), str) or \
            not harness.LEASE_RE.match(g["lease"]):
        return "bad lease %r" % (g.get("lease"),)
    if not isinstance(g.get("sequencer"), str) or \
            not g["sequencer"].startswith("fg1."):
        return "bad sequencer %r" % (g.get("sequencer"),)
    if g.get("mode") != "exclusive" or g.get("holds") != 1:
        return "bad mode/holds %r/%r" % (g.get("mode"), g.get("holds"))
    return None


ALLOWED = {
    # kind: {status: error code (None: no JSON error)}
    "acquire": {200: None, 409: "lock_held", 503: "lock_store_unavailable"},
    "write": {200: None, 503: "lock_store_unavailable"},
    "release": {204: None, 503: "lock_store_unavailable"},
}


def check_load(ops, records, lost_grant_ok=lambda op: False,
               unavailable_ok=lambda op: True):
    """Problems found in a load's answers and what reached the upstream:

    - every answer is one the API allows for it (a 409 stale_token write
      or a 410 lease_expired release only where lost_grant_ok(op) says the
      grant may have been lost; a 503 only where unavailable_ok(op));
    - every grant is well formed;
    - per lock, no token is granted twice, and a grant asked for after
      another grant's answer came has a greater token;
    - per path, the upstream got writes in non-decreasing token order,
      each carrying the token its body names, and every write answered
      200 reached it.
    """
    problems = []
    for o in ops:
        allowed = ALLOWED[o.kind]
        if o.status is None:
            problems.append("no answer: %r" % o)
        elif o.detail:
            problems.append("%r" % o)
        elif o.status == 503 and not unavailable_ok(o):
            problems.append("unavailable where it must not be: %r" % o)
        elif o.status in allowed and o.code == allowed[o.status]:
            pass
        elif o.kind == "write" and o.status == 409 and \
                o.code == "stale_token" and lost_grant_ok(o):
            pass
        elif o.kind == "release" and o.status == 410 and \
                o.code == "lease_expired" and lost_grant_ok(o):
            pass
        else:
            problems.append("unexpected answer: %r" % o)
    problems += check_tokens([o for o in ops if o.kind == "acquire" and
                              o.status == 200 and o.token is not None])
    problems += check_upstream(records, [o for o in ops if o.kind == "write"
                                         and o.status == 200])
    return problems


def check_tokens(grants):
    """No token twice per lock; a grant asked for after another grant of
    the lock was answered has a greater token."""
    problems = []
    by_name = {}
    for g in grants:
        by_name.setdefault(g.name, []).append(g)
    for name, gs in by_name.items():
        seen = {}
        for g in gs:
            if g.token in seen:
                problems.append("token %d of %s granted twice: %r and %r"
                                % (g.token, name, seen[g.token], g))
            seen[g.token] = g
        done = sorted(gs, key=lambda g: g.t_recv)
        j, best = 0, None
        for g in sorted(gs, key=lambda g: g.t_sent):
            while j < len(done) and done[j].t_recv < g.t_sent:
                if best is None or done[j].token > best.token:
                    best = done[j]
                j += 1
            if best is not None and g.token <= best.token:
                problems.append("%s: token went backwards: %r was asked for "
                                "after %r was granted" % (name, g, best))
    return problems


def check_upstream(records, ok_writes):
    problems = []
    last = {}
    got = set()
    for r in records:
        if r["method"] != "PUT":
            continue
        path = r["path"]
        try:
            tok = int(r["token"])
        except (TypeError, ValueError):
            problems.append("a write reached the upstream without its "
                            "token: %r" % r)
            continue
        body = r["body"].decode("utf-8", "replace")
        if body != "%s %d" % (path[1:], tok):
            problems.append("upstream got %r with token %d" % (body, tok))
        if path in last and tok < last[path]:
            problems.append("%s: the upstream got token %d after %d"
                            % (path, tok, last[path]))
        last[path] = max(tok, last.get(path, 0))
        got.add((path, tok))
    for w in ok_writes:
        if ("/" + w.name, w.token) not in got:
            problems.append("write answered 200 never reached the upstream: "
                            "%r" % w)
    return problems


# ---------------------------------------------------------------------------
# the base of the topology tests


class TopologyCase(harness.TestCase):
    """Each test starts its own topology, upstream and gateways; the
    topology's logs are shown with the gateways' when a test fails."""

    uses_shared_env = False

    def setUp(self):
        super().setUp()
        self.topo_logs = []

    def own(self, topo):
        """Starts a topology, stopped at cleanup; returns it."""
        self.addCleanup(topo.stop)
        nodes = list(getattr(topo, "nodes", [])) + \
            list(getattr(topo, "sentinels", []))
        self.topo_logs += nodes
        topo.start()
        return topo

    def recording_upstream(self):
        """A stand-in upstream that answers 200 "upstream ok" and records,
        in arrival order, every request: method, path, the Fencing-Token
        the gateway forwarded (--forward-token yes), the body."""
        up = origins.StandIn().start()
        self.addCleanup(up.stop)
        return up

    def gateways(self, url, upstream, n=2, flags=()):
        gws = [self.start_gateway(url, upstream.port,
                                  ["--forward-token", "yes"] + list(flags))
               for _ in range(n)]
        for g in gws:
            if not g.wait_healthy(slack(10.0)):
                self.fail("gateway on %s never became healthy:\n%s"
                          % (url, g.log_tail()))
        return gws

    def retrying(self, fn, what, timeout=None):
        """Calls fn until it answers something other than 503 (a client
        honouring Retry-After, a little faster); returns that answer."""
        deadline = time.monotonic() + (timeout or slack(10.0))
        while True:
            r = fn()
            if r.status != 503:
                return r
            if time.monotonic() > deadline:
                self.fail("%s still 503 after %.0f s: %r"
                          % (what, timeout or slack(10.0), r))
            time.sleep(0.1)

    def run_load(self, load):
        """Starts a load; it is stopped at cleanup whatever happens."""
        load.start()
        self.addCleanup(lambda: load._stop.set())
        return load

    def assert_no_problems(self, problems, what):
        if problems:
            self.fail("%s: %d problems, the first ones:\n  %s"
                      % (what, len(problems), "\n  ".join(problems[:12])))

    def failure_logs(self):
        out = [super().failure_logs()]
        for n in self.topo_logs:
            out.append("--- tail of %s (port %d) ---\n%s"
                       % (os.path.relpath(n.logpath, harness.tmp_root()),
                          n.port, file_tail(n.logpath, 15)))
        return "\n".join(out)
