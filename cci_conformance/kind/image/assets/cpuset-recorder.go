// Command cpuset-recorder is the node's OCI runtime: it records the cpuset the kubelet asked for
// each container, applies an image of it on the CPUs the node really has, and runs runc.
//
// A faked topology can be larger than the machine. The kubelet hands out CPU ids of the fake;
// cgroups accept only real ones. So the requested set is logged (one JSON line per create and
// update, in /var/log/cci-cpusets.jsonl) and, when it is not a subset of the node's own cpuset,
// folded onto it (CPU c -> the (c mod n)-th allowed CPU). Tests read the log, not cgroups.
// A container's start is logged once runc started it, so the harness knows a pod runs as soon as
// the runtime does, not a PLEG relist and a status sync later when the API server says so.
// It also raises an oomScoreAdj the node may not set (see clampOOMScoreAdj).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults for the node; the environment overrides them only for the harness's own tests.
var (
	realRuntime = envOr("CPUSET_RECORDER_RUNTIME", "/usr/sbin/runc")
	logPath     = envOr("CPUSET_RECORDER_LOG", "/var/log/cci-cpusets.jsonl")
)

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

var valuedGlobals = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

func parseList(text string) []int {
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(text), ",") {
		if part == "" {
			continue
		}
		bounds := strings.SplitN(part, "-", 2)
		lo, err := strconv.Atoi(bounds[0])
		if err != nil {
			return nil
		}
		hi := lo
		if len(bounds) == 2 {
			if hi, err = strconv.Atoi(bounds[1]); err != nil {
				return nil
			}
		}
		for c := lo; c <= hi; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func formatList(cpus []int) string {
	sort.Ints(cpus)
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] <= cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func allowed(file string) []int {
	for _, path := range []string{"/sys/fs/cgroup/cpuset/" + file, "/sys/fs/cgroup/" + file + ".effective"} {
		if data, err := os.ReadFile(path); err == nil {
			return parseList(string(data))
		}
	}
	return nil
}

// fold maps a requested set onto the allowed one; a set already inside it is kept as is.
func fold(requested string, allowedIDs []int) string {
	want := parseList(requested)
	if len(want) == 0 || len(allowedIDs) == 0 {
		return requested
	}
	inside := map[int]bool{}
	for _, c := range allowedIDs {
		inside[c] = true
	}
	subset := true
	for _, c := range want {
		subset = subset && inside[c]
	}
	if subset {
		return requested
	}
	seen := map[int]bool{}
	var out []int
	for _, c := range want {
		real := allowedIDs[c%len(allowedIDs)]
		if !seen[real] {
			seen[real] = true
			out = append(out, real)
		}
	}
	return formatList(out)
}

// rewriteCPU changes resources.cpu in place and returns what was asked and what is applied.
func rewriteCPU(cpu map[string]any) (asked, applied, mems string) {
	if cpu == nil {
		return "", "", ""
	}
	if v, ok := cpu["cpus"].(string); ok && v != "" {
		asked = v
		applied = fold(v, allowed("cpuset.cpus"))
		cpu["cpus"] = applied
	}
	if v, ok := cpu["mems"].(string); ok && v != "" {
		mems = fold(v, allowed("cpuset.mems"))
		cpu["mems"] = mems
	}
	return asked, applied, mems
}

// clampOOMScoreAdj raises process.oomScoreAdj to our own value when we may not go lower.
//
// Lowering oom_score_adj needs CAP_SYS_RESOURCE. Nodes on hosts whose capability bounding set lacks
// it cannot start any container the kubelet marks critical (static pods get -998): runc's child
// fails writing /proc/self/oom_score_adj. Without the capability the lowest value allowed is our own.
func clampOOMScoreAdj(spec map[string]any) bool {
	process, _ := spec["process"].(map[string]any)
	want, ok := process["oomScoreAdj"].(float64)
	if !ok || hasCapability(24) {
		return false
	}
	data, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return false
	}
	own, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || int(want) >= own {
		return false
	}
	process["oomScoreAdj"] = own
	return true
}

// hasCapability reports whether capability number bit is in our effective set.
func hasCapability(bit uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "CapEff:")), 16, 64)
			return err != nil || mask>>bit&1 == 1
		}
	}
	return true
}

func record(entry map[string]any) {
	entry["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(entry)
	if err != nil {
		return
	}
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(line, '\n'))
}

func optionIndex(args []string, names ...string) int {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return i + 1
			}
		}
	}
	return -1
}

func handleCreate(rest []string) {
	bundle, _ := os.Getwd()
	if i := optionIndex(rest, "--bundle", "-b"); i >= 0 {
		bundle = rest[i]
	}
	path := filepath.Join(bundle, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var spec map[string]any
	if json.Unmarshal(data, &spec) != nil {
		return
	}
	linux, _ := spec["linux"].(map[string]any)
	resources, _ := linux["resources"].(map[string]any)
	cpu, _ := resources["cpu"].(map[string]any)
	asked, applied, mems := rewriteCPU(cpu)
	clamped := clampOOMScoreAdj(spec)
	changed := clamped || asked != applied
	annotations, _ := spec["annotations"].(map[string]any)
	entry := map[string]any{"op": "create", "id": rest[len(rest)-1], "cpus": asked, "applied": applied, "mems": mems}
	if linux != nil {
		entry["cgroupsPath"] = linux["cgroupsPath"]
	}
	for _, k := range []string{"io.kubernetes.cri.container-type", "io.kubernetes.cri.container-name",
		"io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-uid"} {
		if v, ok := annotations[k]; ok {
			entry[k[strings.LastIndex(k, ".")+1:]] = v
		}
	}
	if out, err := json.Marshal(spec); err == nil && changed {
		os.WriteFile(path, out, 0o644)
	}
	record(entry)
}

// optionValue finds a valued option given as "--name value" or "--name=value" (go-runc, which
// containerd's shim uses, writes "update --resources=- <id>").
func optionValue(args []string, names ...string) (string, bool) {
	if i := optionIndex(args, names...); i >= 0 {
		return args[i], true
	}
	for _, a := range args {
		for _, n := range names {
			if strings.HasPrefix(a, n+"=") {
				return strings.TrimPrefix(a, n+"="), true
			}
		}
	}
	return "", false
}

// handleUpdate rewrites the --resources JSON; with "-" it is read from stdin and fed to runc on a pipe.
func handleUpdate(args []string, rest []string, restStart int) []string {
	source, ok := optionValue(rest, "--resources", "-r")
	if !ok {
		return args
	}
	var data []byte
	var err error
	if source == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(source)
	}
	if err != nil {
		return args
	}
	var res map[string]any
	if json.Unmarshal(data, &res) != nil {
		return args
	}
	cpu, _ := res["cpu"].(map[string]any)
	asked, applied, mems := rewriteCPU(cpu)
	out, _ := json.Marshal(res)
	if source == "-" {
		r, w, perr := os.Pipe()
		if perr == nil {
			w.Write(out)
			w.Close()
			syscall.Dup2(int(r.Fd()), 0)
		}
	} else {
		os.WriteFile(source, out, 0o644)
	}
	if asked != "" {
		record(map[string]any{"op": "update", "id": rest[len(rest)-1], "cpus": asked, "applied": applied, "mems": mems})
	}
	return args
}

// handleStart runs runc start as a child and logs the start only when it succeeded: a logged
// start means the container's process runs (runc start returns once it released it).
func handleStart(args []string, id string) {
	cmd := exec.Command(realRuntime, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if err == nil {
		record(map[string]any{"op": "start", "id": id})
		os.Exit(0)
	}
	if exit, ok := err.(*exec.ExitError); ok {
		os.Exit(exit.ExitCode())
	}
	fmt.Fprintf(os.Stderr, "cpuset-recorder: %s: %v\n", realRuntime, err)
	os.Exit(127)
}

func main() {
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if valuedGlobals[a] {
			i++
			continue
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		rest := args[i+1:]
		if len(rest) > 0 {
			switch a {
			case "create", "run":
				handleCreate(rest)
			case "update":
				args = handleUpdate(args, rest, i+1)
			case "start":
				handleStart(args, rest[len(rest)-1])
			}
		}
		break
	}
	err := syscall.Exec(realRuntime, append([]string{realRuntime}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "cpuset-recorder: exec %s: %v\n", realRuntime, err)
	os.Exit(127)
}
