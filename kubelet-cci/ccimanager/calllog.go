package ccimanager

import (
	"encoding/json"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// CallLogEnv names the file of the per-call record: one JSON line per driver call (CCIAdmit,
// CCIAddContainerResource) and per whole CCI admission, naming the pod and container. The histograms
// (metrics.go) give sums only, so a harness reading them must start one pod at a time to time each pod; with
// the record it can start pods side by side and still time every pod's calls alone. Off unless the variable
// names a file (the harness's kind nodes set it).
const CallLogEnv = "CCI_CALL_LOG"

// Call names of the record: the two driver calls as the protocol names them, and the manager's whole admission.
const (
	CallAdmit     = "CCIAdmit"
	CallAdd       = "CCIAddContainerResource"
	CallAdmission = "admission"
)

// CallEntry is one line of the record.
type CallEntry struct {
	Call      string  `json:"call"`
	Pod       string  `json:"pod"`
	Container string  `json:"container"`
	Seconds   float64 `json:"seconds"`
	Outcome   string  `json:"outcome"`
	At        float64 `json:"at"` // unix seconds when the call ended
}

type callLog struct {
	mu   sync.Mutex
	file *os.File
}

// openCallLog opens the record named by CallLogEnv for appending; nil when unset or not writable (the kubelet
// then runs without it: the record serves measurement, never admission).
func openCallLog() *callLog {
	path := os.Getenv(CallLogEnv)
	if path == "" {
		return nil
	}
	file, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		klog.ErrorS(err, "CCI call record not written", "env", CallLogEnv, "path", path)
		return nil
	}
	return &callLog{file: file}
}

// record appends one entry as a whole line (one write of an O_APPEND file: a reader never sees half of it).
func (l *callLog) record(call, podUID, container string, d time.Duration, outcome string) {
	if l == nil {
		return
	}
	line, err := json.Marshal(CallEntry{Call: call, Pod: podUID, Container: container, Seconds: d.Seconds(),
		Outcome: outcome, At: float64(time.Now().UnixNano()) / 1e9})
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.file.Write(append(line, '\n')); err != nil {
		klog.ErrorS(err, "CCI call record write failed", "path", l.file.Name())
	}
}
