# bench/auth_tls.sh: the identity and TLS rows of bench/run.sh (issue 17).
# Sourced by run.sh once its helpers, its redis-server and its storage nginx
# are up; not run on its own.
#
#   auth: the per-request cost of a key. A fencegate with an auth-file of
#     AUTH_PRINCIPALS principals (the bench key one of them; a key is looked
#     up by comparing its SHA-256 with every principal's) and --proxy-auth
#     required, against an open fencegate (no auth-file), same flags else:
#     1 KiB GETs, `Fence-Authorization: Bearer <key>` on every request to
#     the first; lock cycles (fence_cycle.lua), `Authorization: Bearer <key>`
#     on every request to the first.
#   tls: one ECDSA P-256 certificate (self-signed, made with the openssl CLI)
#     for a fencegate with --tls-cert/--tls-key and for nginx as an HTTPS
#     reverse proxy (upstream keepalive, as run.sh's plain one) to the same
#     storage: 1 KiB GETs over kept-alive connections; then one new TLS
#     connection per GET (`Connection: close`), whose rate is the handshake
#     rate. nginx keeps no session cache and issues no tickets, so its
#     handshakes are full ones; whether each server resumes an offered
#     session is checked and printed (wrk offers the last one on reconnect).
#
# Each comparison runs AUTH_ROUNDS or TLS_ROUNDS rounds, the order reversed
# every other round, and the rounds are averaged. The fencegate under test
# goes first in the first round, so that a first run that comes out
# slower counts against it, not for it.
#
# Invariant: the bench key lives only in files of mode 0600 under
# $TMP/auth, read by curl (-H @FILE) and by the wrk scripts; it is never on
# a command line, in a log or in the output. Every process started here is
# in PIDS (run.sh stops it on exit) and is stopped by PID when its rows end.
# shellcheck shell=bash disable=SC2034 # sets run.sh's RUN_HOOK, FG_SCHEME, FG_CURL

AUTH_DIR="$TMP/auth"
TLS_DIR="$TMP/tls"
AT_PATH="/fgt-$RUNID/obj-" # the objects of these rows, NOBJ of them
# summary figures, empty when not measured
AUTH_GET_OPEN="" AUTH_GET_KEY="" AUTH_CPS_OPEN="" AUTH_CPS_KEY="" AUTH_ERRS_FG="" AUTH_ERRS_PEER=""
AUTH_GET_OPEN_US="" AUTH_GET_KEY_US="" AUTH_CYC_OPEN_US="" AUTH_CYC_KEY_US=""
TLS_GET_FG="" TLS_GET_NG="" TLS_HS_FG="" TLS_HS_NG="" TLS_ERRS_FG="" TLS_ERRS_PEER=""
TLS_RESUME_FG="" TLS_RESUME_NG="" TLS_HS_FG_US="" TLS_HS_NG_US=""
AT_SKIPPED=""

# at_objects: NOBJ OBJ_SIZE-byte objects at AT_PATH on the storage; 1 on failure
at_objects() {
	local i code
	[ -s "$TMP/at-obj.bin" ] || head -c "$OBJ_SIZE" /dev/zero | tr '\0' x >"$TMP/at-obj.bin"
	for ((i = 0; i < NOBJ; i++)); do
		code=$(curl -s -o "$TMP/at-put.last" -w '%{http_code}' -T "$TMP/at-obj.bin" "$STORE_URL$AT_PATH$i" || true)
		case "$code" in 201 | 204) ;; *)
			say "  pre-create PUT $AT_PATH$i -> $code $(show "$TMP/at-put.last")"
			return 1
			;;
		esac
	done
}

# at_auth_file: $AUTH_DIR/auth-file of AUTH_PRINCIPALS principals, each
# minted by `fencegate --new-key`; the one named bench (in the middle of
# the file) holds the bench key, written to lock.hdr and proxy.hdr as the
# header lines of the lock API and of proxied requests. 1 on failure.
at_auth_file() {
	local i name key lname lcred mid=$((AUTH_PRINCIPALS / 2))
	(umask 077 && mkdir -p "$AUTH_DIR")
	: >"$AUTH_DIR/auth-file"
	chmod 600 "$AUTH_DIR/auth-file"
	for ((i = 1; i <= AUTH_PRINCIPALS; i++)); do
		name=$(printf 'svc-%04d' "$i")
		[ "$i" = "$mid" ] && name=bench
		# line 1 the key, line 2 "NAME sha256:HEX   # add rights: ..."
		key="" lname="" lcred=""
		{ read -r key && read -r lname lcred _; } < <("$BIN" --new-key "$name" 2>/dev/null || true) || true
		if [ -z "$key" ] || [ "$lname" != "$name" ] || [ "${lcred#sha256:}" = "$lcred" ]; then
			say "  !! fencegate --new-key $name gave no key and auth-file line"
			return 1
		fi
		if [ "$name" = bench ]; then
			printf '%s %s lock:* observe:* read:*\n' "$name" "$lcred" >>"$AUTH_DIR/auth-file"
			(
				umask 077
				printf 'Authorization: Bearer %s\n' "$key" >"$AUTH_DIR/lock.hdr"
				printf 'Fence-Authorization: Bearer %s\n' "$key" >"$AUTH_DIR/proxy.hdr"
			)
		else
			printf '%s %s lock:%s/ observe:%s/ read:%s/\n' "$name" "$lcred" "$name" "$name" "$name" >>"$AUTH_DIR/auth-file"
		fi
	done
	key=""
	[ -s "$AUTH_DIR/lock.hdr" ]
}

# at_mean_cps LABEL... -> the mean of the cps= fields of their RESULT lines (empty when none)
at_mean_cps() {
	local l v n=0 t=0
	for l in "$@"; do
		v=$(field "$(grep '^RESULT ' "$TMP/$l.txt" 2>/dev/null || true)" cps)
		[ -n "$v" ] || continue
		t=$(calc "print $t + $v")
		n=$((n + 1))
	done
	[ "$n" -gt 0 ] && calc "printf \"%.1f\", $t / $n"
	return 0
}
# How a server spread its CPU over its loops (fencegate's threads, nginx's
# worker processes) in a run: fencegate's loops share one listening socket
# and whichever is idle first accepts, so wrk's 32 connects can land
# unevenly, and a run whose connections all sit on one loop serves from one
# core. The rates compare runs, so each says its spread.
AT_SPREAD_PID=""
declare -A AT_SPREAD=() # run -> the busiest thread's share of the server's CPU, %
at_ticks() { # at_ticks PID -> "tid ticks" for every thread of it and of its children
	local p t
	for p in $(kids "$1"); do
		for t in /proc/"$p"/task/*; do
			printf '%s %s\n' "${t##*/}" "$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "$t/stat" 2>/dev/null || echo 0)"
		done
	done
}
at_spread_hook() { # RUN_HOOK: before|after LABEL
	if [ "$1" = before ]; then
		at_ticks "$AT_SPREAD_PID" | sort >"$TMP/$2.ticks0"
		return 0
	fi
	at_ticks "$AT_SPREAD_PID" | sort >"$TMP/$2.ticks1"
	AT_SPREAD[$2]=$(join "$TMP/$2.ticks0" "$TMP/$2.ticks1" |
		awk '{ d = $3 - $2; t += d; if (d > m) m = d } END { if (t > 0) printf "%.0f", m / t * 100 }')
}
# at_spread PID LABEL CMD...: CMD (io_run or run_wrk LABEL ...) with PID's
# spread taken around its measured run, then said
at_spread() {
	local pid=$1 label=$2
	shift 2
	AT_SPREAD_PID=$pid
	RUN_HOOK=at_spread_hook
	"$@"
	RUN_HOOK=""
	say "  $(printf '%-28s' '') busiest thread: ${AT_SPREAD[$label]:-?}% of the server's CPU ($(kids "$pid" | wc -l) process(es), $(at_ticks "$pid" | wc -l) thread(s))"
}
at_errs() { # at_errs LABEL...: errors over the wrk runs that have a RESULT line
	local l t=0 line
	for l in "$@"; do
		line=$(grep '^RESULT ' "$TMP/$l.txt" 2>/dev/null || true)
		[ -n "$line" ] && t=$((t + $(errs_of "$line")))
	done
	echo "$t"
}

# ---- auth ----------------------------------------------------------------
auth_rows() {
	local po pk uo uk opid kpid r t order c1 c2 c3 c4 ok=1 labels_o=() labels_k=() gets_o=() gets_k=()
	say "[auth] a fencegate with an auth-file of $AUTH_PRINCIPALS principals and --proxy-auth required (fg-key)" \
		"against an open one, no auth-file (fg-open); same flags else; the bench key one of the principals, rights lock:* observe:* read:*"
	if ! at_auth_file; then
		AT_SKIPPED+="${AT_SKIPPED:+, }auth (no auth-file)"
		return 0
	fi
	say "  auth-file: $(grep -c . "$AUTH_DIR/auth-file") lines, $(stat -c %s "$AUTH_DIR/auth-file") bytes, keys minted with fencegate --new-key"
	at_objects || { AT_SKIPPED+="${AT_SKIPPED:+, }auth (no objects)"; return 0; }
	read -r po pk < <(free_ports 2)
	uo="http://127.0.0.1:$po" uk="http://127.0.0.1:$pk"
	if ! start_fg fg-open "$po" "127.0.0.1:$REDIS_PORT"; then
		XFG_DIED+="${XFG_DIED:+, }fg-open did not start"
		return 0
	fi
	opid=$XPID
	FG_CURL=(-H "@$AUTH_DIR/lock.hdr")
	if ! start_fg fg-key "$pk" "127.0.0.1:$REDIS_PORT" --auth-file "$AUTH_DIR/auth-file" --proxy-auth required; then
		FG_CURL=()
		XFG_DIED+="${XFG_DIED:+, }fg-key did not start"
		xfg_done fg-open "$opid" "the auth runs"
		return 0
	fi
	FG_CURL=()
	kpid=$XPID
	# what is measured is what it claims: fg-key refuses without the key and serves with it
	c1=$(curl -s -o "$TMP/at.last" -w '%{http_code}' "$uk${AT_PATH}0" || true)
	c2=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -H "@$AUTH_DIR/proxy.hdr" "$uk${AT_PATH}0" || true)
	c3=$(curl -s -o /dev/null -w '%{http_code}' -XPOST -H 'Content-Type: application/json' \
		"$uk/_fence/v1/locks/fgbench-nokey-$RUNID" -d '{"ttl_ms":30000}' || true)
	c4=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "$uo${AT_PATH}0" || true)
	say "  smoke: GET ${AT_PATH}0 on fg-key without a key -> $c1 $(show "$TMP/at.last"); with Fence-Authorization -> $c2;" \
		"acquire without a key -> $c3; GET on fg-open -> $c4"
	[ "$c1" = 401 ] && [ "$c2" = "200 $OBJ_SIZE" ] && [ "$c3" = 401 ] && [ "$c4" = "200 $OBJ_SIZE" ] || ok=0
	if [ "$ok" = 1 ]; then
		track_only redis "$REDIS_PID" nginx-store "$STORE_PID" fg-open "$opid" fg-key "$kpid"
		say "[auth GET] ${OBJ_SIZE}-byte GETs of $NOBJ objects, wrk -t$WRK_THREADS -c$CONNS; $AUTH_ROUNDS round(s), the order reversed every other round"
		for ((r = 1; r <= AUTH_ROUNDS; r++)); do
			order="key open"
			[ $((r % 2)) = 0 ] && order="open key"
			for t in $order; do
				case $t in
				open) P_PATH=$AT_PATH at_spread "$opid" auth-get-open-r$r io_run auth-get-open-r$r fg-open "$uo" GET ;;
				key) P_PATH=$AT_PATH at_spread "$kpid" auth-get-key-r$r io_run auth-get-key-r$r fg-key "$uk" GET "" "$AUTH_DIR/proxy.hdr" ;;
				esac
			done
		done
		for ((r = 1; r <= AUTH_ROUNDS; r++)); do gets_o+=("auth-get-open-r$r"); gets_k+=("auth-get-key-r$r"); done
		io_merge auth-get-open "${gets_o[@]}"
		io_merge auth-get-key "${gets_k[@]}"
		AUTH_GET_OPEN=$(iof auth-get-open ok_rps)
		AUTH_GET_KEY=$(iof auth-get-key ok_rps)
		# throughput on a shared 2-core box drifts by more than the cost
		# measured; the gateway's own CPU per request drifts much less
		AUTH_GET_OPEN_US=$(cpu_us_per fg-open requests "${gets_o[@]}")
		AUTH_GET_KEY_US=$(cpu_us_per fg-key requests "${gets_k[@]}")
		say "  CPU per GET over the rounds: fg-open ${AUTH_GET_OPEN_US:--} us, fg-key ${AUTH_GET_KEY_US:--} us"
		say "[auth cycles] the load of [lock cycles, fencegate] (fence_cycle.lua, ring of $NAME_RING names per wrk thread);" \
			"fg-key's requests carry Authorization: Bearer; $AUTH_ROUNDS round(s), the order reversed every other round"
		for ((r = 1; r <= AUTH_ROUNDS; r++)); do
			order="key open"
			[ $((r % 2)) = 0 ] && order="open key"
			for t in $order; do
				say "  cycles-$t-r$r:"
				case $t in
				open) at_spread "$opid" auth-cycles-open-r$r \
					run_wrk auth-cycles-open-r$r fg-open "$HERE/fence_cycle.lua" "$uo" "fgo-$RUNID-r$r" "$NAME_RING" ;;
				key) at_spread "$kpid" auth-cycles-key-r$r \
					run_wrk auth-cycles-key-r$r fg-key "$HERE/fence_cycle.lua" "$uk" "fgk-$RUNID-r$r" "$NAME_RING" "$AUTH_DIR/lock.hdr" ;;
				esac
				[ -n "$WRK_LINE" ] && report_cycles "auth-cycles-$t-r$r" "$WRK_LINE"
			done
			labels_o+=("auth-cycles-open-r$r")
			labels_k+=("auth-cycles-key-r$r")
		done
		AUTH_CPS_OPEN=$(at_mean_cps "${labels_o[@]}")
		AUTH_CPS_KEY=$(at_mean_cps "${labels_k[@]}")
		AUTH_CYC_OPEN_US=$(cpu_us_per fg-open cycles "${labels_o[@]}")
		AUTH_CYC_KEY_US=$(cpu_us_per fg-key cycles "${labels_k[@]}")
		say "  mean of $AUTH_ROUNDS round(s): fg-open ${AUTH_CPS_OPEN:--} cycles/s, fg-key ${AUTH_CPS_KEY:--} cycles/s;" \
			"CPU per cycle: fg-open ${AUTH_CYC_OPEN_US:--} us, fg-key ${AUTH_CYC_KEY_US:--} us"
		AUTH_ERRS_FG=$(($(sum_errs "${gets_k[@]}") + $(at_errs "${labels_k[@]}")))
		AUTH_ERRS_PEER=$(($(sum_errs "${gets_o[@]}") + $(at_errs "${labels_o[@]}")))
		track_main
	else
		say "  !! the smoke answers are not 401 / 200 $OBJ_SIZE / 401 / 200 $OBJ_SIZE: the auth rows are not measured"
		AT_SKIPPED+="${AT_SKIPPED:+, }auth (smoke failed)"
	fi
	xfg_done fg-key "$kpid" "the auth runs"
	xfg_done fg-open "$opid" "the auth runs"
}

# ---- TLS -----------------------------------------------------------------
# tls_info PORT: the protocol, suite, signature and key exchange the openssl
# client (wrk's library) gets from the server, on one line
tls_info() {
	timeout 10 openssl s_client -brief -connect "127.0.0.1:$1" -servername 127.0.0.1 -CAfile "$TLS_DIR/cert.pem" \
		</dev/null 2>&1 | awk -F': *' '/^(Protocol version|Ciphersuite|Signature type|Server Temp Key|Verification):/ {
			printf "%s%s %s", (n++ ? ", " : ""), $1, $2 } END { print "" }' || true
}
# tls_resumes PORT -> yes, no or ?: does the server resume a session the
# client offers. The first connection makes a whole request, so that a TLS
# 1.3 ticket has come; s_client writes the session when one comes (or, in
# TLS 1.2, when the server gives a session id), so an answer and no session
# written means the server offered nothing to resume.
tls_resumes() {
	local s="$TLS_DIR/sess-$1.pem" out
	rm -f "$s"
	out=$(printf 'GET /fgb-probe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' |
		timeout 10 openssl s_client -quiet -ign_eof -connect "127.0.0.1:$1" -servername 127.0.0.1 \
			-CAfile "$TLS_DIR/cert.pem" -sess_out "$s" 2>/dev/null || true)
	case "$out" in HTTP/1.1\ *) ;; *) echo "?"; return 0 ;; esac
	[ -s "$s" ] || { echo no; return 0; }
	out=$(timeout 10 openssl s_client -connect "127.0.0.1:$1" -servername 127.0.0.1 -CAfile "$TLS_DIR/cert.pem" \
		-sess_in "$s" </dev/null 2>/dev/null || true)
	case "$out" in *$'\nReused, '*) echo yes ;; *$'\nNew, '*) echo no ;; *) echo "?" ;; esac
}
tls_rows() {
	local pf pn uf un fpid npid r t order c1 c2 c3 ok=1 kind lf ln
	say "[tls] one self-signed ECDSA P-256 certificate (openssl req -x509 -newkey ec, prime256v1; SAN IP:127.0.0.1)" \
		"for a fencegate with --tls-cert/--tls-key (fg-tls) and nginx as an HTTPS reverse proxy (nginx-tls: the plain" \
		"proxy's forwarding, $FG_LOOPS worker(s), reuseport; ssl_session_cache off, ssl_session_tickets off)"
	mkdir -p "$TLS_DIR"
	if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
		-keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" >"$TLS_DIR/req.log" 2>&1; then
		say "  !! openssl could not make the certificate: $(show "$TLS_DIR/req.log")"
		AT_SKIPPED+="${AT_SKIPPED:+, }tls (no certificate)"
		return 0
	fi
	chmod 600 "$TLS_DIR/key.pem"
	say "  certificate: $(openssl x509 -in "$TLS_DIR/cert.pem" -noout -text | awk -F': *' '/Public Key Algorithm|NIST CURVE|Signature Algorithm/ { print $2 }' | sort -u | paste -sd, -)"
	at_objects || { AT_SKIPPED+="${AT_SKIPPED:+, }tls (no objects)"; return 0; }
	printf 'Connection: close\n' >"$TLS_DIR/close.hdr"
	read -r pf pn < <(free_ports 2)
	uf="https://127.0.0.1:$pf" un="https://127.0.0.1:$pn"
	nginx_conf nginx-tls "$FG_LOOPS" "		listen 127.0.0.1:$pn ssl reuseport;
		ssl_certificate $TLS_DIR/cert.pem;
		ssl_certificate_key $TLS_DIR/key.pem;
		ssl_protocols TLSv1.2 TLSv1.3;
		ssl_session_cache off;
		ssl_session_tickets off;
$NGINX_PROXY_LOCATION" "$NGINX_PROXY_UPSTREAM"
	start_nginx nginx-tls "$un" --cacert "$TLS_DIR/cert.pem"
	npid=$NGINX_PID
	FG_SCHEME=https
	FG_CURL=(--cacert "$TLS_DIR/cert.pem")
	if ! start_fg fg-tls "$pf" "127.0.0.1:$REDIS_PORT" --tls-cert "$TLS_DIR/cert.pem" --tls-key "$TLS_DIR/key.pem"; then
		FG_SCHEME=http FG_CURL=()
		XFG_DIED+="${XFG_DIED:+, }fg-tls did not start (HTTPS)"
		stop_pid "$npid"
		return 0
	fi
	FG_SCHEME=http FG_CURL=()
	fpid=$XPID
	c1=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' --cacert "$TLS_DIR/cert.pem" "$uf${AT_PATH}0" || true)
	c2=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' --cacert "$TLS_DIR/cert.pem" "$un${AT_PATH}0" || true)
	c3=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$pf${AT_PATH}0" || true)
	say "  smoke: GET ${AT_PATH}0 over HTTPS (certificate verified) on fg-tls -> $c1, on nginx-tls -> $c2;" \
		"plain HTTP on fg-tls's port -> $c3 (HTTPS only: no HTTP answer)"
	[ "$c1" = "200 $OBJ_SIZE" ] && [ "$c2" = "200 $OBJ_SIZE" ] || ok=0
	case "$c3" in 000 | 400) ;; *) ok=0 ;; esac
	say "  fg-tls:    $(tls_info "$pf")"
	say "  nginx-tls: $(tls_info "$pn")"
	TLS_RESUME_FG=$(tls_resumes "$pf")
	TLS_RESUME_NG=$(tls_resumes "$pn")
	say "  resumes an offered session: fg-tls $TLS_RESUME_FG, nginx-tls $TLS_RESUME_NG"
	if [ "$ok" = 1 ]; then
		track_only redis "$REDIS_PID" nginx-store "$STORE_PID" fg-tls "$fpid" nginx-tls "$npid"
		for kind in get hs; do
			if [ "$kind" = get ]; then
				say "[tls GET] ${OBJ_SIZE}-byte GETs over HTTPS, kept-alive connections, wrk -t$WRK_THREADS -c$CONNS;" \
					"$TLS_ROUNDS round(s), the order reversed every other round"
			else
				say "[tls handshakes] one new TLS connection per ${OBJ_SIZE}-byte GET (Connection: close; wrk connects again" \
					"after each answer), wrk -t$WRK_THREADS -c$CONNS; $TLS_ROUNDS round(s), the order reversed every other round"
			fi
			for ((r = 1; r <= TLS_ROUNDS; r++)); do
				order="fg nginx"
				[ $((r % 2)) = 0 ] && order="nginx fg"
				for t in $order; do
					case $kind-$t in
					get-fg) P_PATH=$AT_PATH at_spread "$fpid" tls-get-fg-r$r io_run tls-get-fg-r$r fg-tls "$uf" GET ;;
					get-nginx) P_PATH=$AT_PATH at_spread "$npid" tls-get-nginx-r$r io_run tls-get-nginx-r$r nginx-tls "$un" GET ;;
					hs-fg) P_PATH=$AT_PATH at_spread "$fpid" tls-hs-fg-r$r \
						io_run tls-hs-fg-r$r fg-tls "$uf" GET "" "$TLS_DIR/close.hdr" ;;
					hs-nginx) P_PATH=$AT_PATH at_spread "$npid" tls-hs-nginx-r$r \
						io_run tls-hs-nginx-r$r nginx-tls "$un" GET "" "$TLS_DIR/close.hdr" ;;
					esac
				done
			done
			lf=() ln=()
			for ((r = 1; r <= TLS_ROUNDS; r++)); do lf+=("tls-$kind-fg-r$r"); ln+=("tls-$kind-nginx-r$r"); done
			io_merge tls-$kind-fg "${lf[@]}"
			io_merge tls-$kind-nginx "${ln[@]}"
		done
		# the handshake rate is bound by wrk's own share of the cores as much as
		# by the server's: the server's CPU per handshake says what it costs
		TLS_HS_FG_US=$(cpu_us_per fg-tls requests "${lf[@]}")
		TLS_HS_NG_US=$(cpu_us_per nginx-tls requests "${ln[@]}")
		say "  CPU per new connection (handshake + GET): fg-tls ${TLS_HS_FG_US:--} us, nginx-tls ${TLS_HS_NG_US:--} us"
		TLS_GET_FG=$(iof tls-get-fg ok_rps)
		TLS_GET_NG=$(iof tls-get-nginx ok_rps)
		TLS_HS_FG=$(iof tls-hs-fg ok_rps)
		TLS_HS_NG=$(iof tls-hs-nginx ok_rps)
		TLS_ERRS_FG=$(sum_errs tls-get-fg tls-hs-fg)
		TLS_ERRS_PEER=$(sum_errs tls-get-nginx tls-hs-nginx)
		track_main
	else
		say "  !! the smoke answers are not 200 $OBJ_SIZE / 200 $OBJ_SIZE / none: the TLS rows are not measured"
		AT_SKIPPED+="${AT_SKIPPED:+, }tls (smoke failed)"
	fi
	xfg_done fg-tls "$fpid" "the TLS runs"
	stop_pid "$npid"
}

# auth_tls_summary: the rows of the summary table (run.sh's ROW, num, r2,
# ratio, verdict)
# shellcheck disable=SC2059
auth_tls_summary() {
	local r
	if want auth; then
		r=$(ratio "$AUTH_GET_KEY" "$AUTH_GET_OPEN")
		printf "$ROW" "GET ${OBJ_SIZE} B, key on each (proxy-auth), req/s" "$(num "$AUTH_GET_KEY")" "open fencegate $(num "$AUTH_GET_OPEN")" \
			"$(r2 "$r")" ">= 0.95x" "$(verdict "$r" '>=' 0.95)"
		printf "$ROW" "  fencegate CPU per GET, us" "$(num "$AUTH_GET_KEY_US")" "open fencegate $(num "$AUTH_GET_OPEN_US")" \
			"$(r2 "$(ratio "$AUTH_GET_KEY_US" "$AUTH_GET_OPEN_US")")" "(info)" ""
		r=$(ratio "$AUTH_CPS_KEY" "$AUTH_CPS_OPEN")
		printf "$ROW" "lock cycles, key on each, cycles/s" "$(num "$AUTH_CPS_KEY")" "open fencegate $(num "$AUTH_CPS_OPEN")" \
			"$(r2 "$r")" ">= 0.95x" "$(verdict "$r" '>=' 0.95)"
		printf "$ROW" "  fencegate CPU per cycle, us" "$(num "$AUTH_CYC_KEY_US")" "open fencegate $(num "$AUTH_CYC_OPEN_US")" \
			"$(r2 "$(ratio "$AUTH_CYC_KEY_US" "$AUTH_CYC_OPEN_US")")" "(info)" ""
		printf "$ROW" "  auth-file principals" "$AUTH_PRINCIPALS" "" "" "" ""
	fi
	if want tls; then
		r=$(ratio "$TLS_GET_FG" "$TLS_GET_NG")
		printf "$ROW" "HTTPS GET ${OBJ_SIZE} B, keep-alive, req/s" "$(num "$TLS_GET_FG")" "nginx HTTPS proxy $(num "$TLS_GET_NG")" \
			"$(r2 "$r")" ">= 0.8x" "$(verdict "$r" '>=' 0.8)"
		r=$(ratio "$TLS_HS_FG" "$TLS_HS_NG")
		printf "$ROW" "TLS handshakes/s (ECDSA P-256, GET each)" "$(num "$TLS_HS_FG")" "nginx HTTPS proxy $(num "$TLS_HS_NG")" \
			"$(r2 "$r")" "report" ""
		printf "$ROW" "  server CPU per handshake + GET, us" "$(num "$TLS_HS_FG_US")" "nginx HTTPS proxy $(num "$TLS_HS_NG_US")" \
			"$(r2 "$(ratio "$TLS_HS_FG_US" "$TLS_HS_NG_US")")" "(info)" ""
		printf "$ROW" "  session resumed when offered" "${TLS_RESUME_FG:--}" "nginx ${TLS_RESUME_NG:--}" "" "" ""
	fi
	# fencegate runs whose busiest thread did 90% or more of its work: one
	# loop served them (see AT_SPREAD above)
	local l n=0 one=0
	for l in "${!AT_SPREAD[@]}"; do
		case $l in auth-* | tls-*-fg-*) ;; *) continue ;; esac
		n=$((n + 1))
		[ "${AT_SPREAD[$l]:-0}" -ge 90 ] && one=$((one + 1))
	done
	[ "$n" -gt 0 ] && printf "$ROW" "  fencegate runs served by one loop" "$one of $n" "" "" "(info)" ""
	local ef="" ep=""
	if [ -n "$AUTH_ERRS_FG$TLS_ERRS_FG" ]; then ef=$((${AUTH_ERRS_FG:-0} + ${TLS_ERRS_FG:-0})); fi
	if [ -n "$AUTH_ERRS_PEER$TLS_ERRS_PEER" ]; then ep=$((${AUTH_ERRS_PEER:-0} + ${TLS_ERRS_PEER:-0})); fi
	printf "$ROW" "failed requests in the auth and TLS runs" "$(num "$ef")" "peers $(num "$ep")" "" "0" "$(verdict "$ef" '==' 0)"
	[ -n "$AT_SKIPPED" ] && printf "$ROW" "auth and TLS rows not measured" "" "$AT_SKIPPED" "" "" ""
	return 0
}
