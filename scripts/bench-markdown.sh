# Sourced by the scripts/bench-*.sh scripts (not run alone): `--markdown` anywhere among a
# script's arguments makes it print its result as markdown for docs/benchmarks.md (the
# command, the machine and the date, then the table) on stdout, while its usual report
# goes to stderr:
#
#   ./scripts/bench-nats.sh --markdown 200000 > table.md
#
# A script sources it with its own arguments and takes back the others:
#
#   . "$(dirname "$0")/bench-markdown.sh" "$@"
#   set -- "${bench_args[@]+"${bench_args[@]}"}"
#
# then writes markdown with `md LINE…` and `md_row CELL…`, which print nothing without
# the flag.
markdown=0
bench_args=()
for arg in "$@"; do
  if [ "$arg" = --markdown ]; then markdown=1; else bench_args+=("$arg"); fi
done
bench_command="./scripts/$(basename "$0")${bench_args[*]+ ${bench_args[*]}}"
if [ "$markdown" = 1 ]; then
  # fd 3 is the caller's stdout, for the markdown; everything else goes to stderr.
  exec 3>&1 1>&2
fi

# md LINE…: lines of the markdown output.
md() {
  if [ "$markdown" = 1 ]; then printf '%s\n' "$@" >&3; fi
}

# md_row CELL…: one table row, `| a | b | c |`.
md_row() {
  local row="|" cell
  for cell in "$@"; do row+=" $cell |"; done
  md "$row"
}

# md_intro: the command, the machine and the date, above a script's tables.
md_intro() {
  local cpu
  cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
  md "Command: \`$bench_command\`" "" \
    "Machine: $(nproc) cores${cpu:+ ($cpu)}, $(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) RAM, Linux $(uname -r); date: $(date -u +%F)." ""
}
