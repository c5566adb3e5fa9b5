package ccimanager

import (
	"time"

	"k8s.io/component-base/metrics"
)

// Admission timing as kubelet metrics, so latency budgets (docs/certification.md) can be checked on a
// real kubelet: one histogram of the CCIAdmit call alone, one of the CCIAddContainerResource call alone
// (the embedded node's driver time counts both calls of a pod start: the kind backend adds the two sums
// to judge the same time), one of the whole CCI admission (driver call, validation, store update,
// checkpoint write). Buckets from 0.5 ms to ~4 s: a driver answers in milliseconds and the node
// profile's deadline is seconds.
var (
	admitDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "kubelet",
		Name:           "cci_admit_duration_seconds",
		Help:           "Duration of CCIAdmit calls to CCI drivers, by driver and admission outcome.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"driver", "outcome"})
	addDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "kubelet",
		Name:           "cci_add_container_duration_seconds",
		Help:           "Duration of CCIAddContainerResource calls to CCI drivers, by driver and outcome (added or the rejection reason).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"driver", "outcome"})
	admissionDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "kubelet",
		Name:           "cci_admission_duration_seconds",
		Help:           "Duration of the CCI manager's admission of one container, by outcome (admitted or the rejection reason).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})
)

// Metrics are the collectors the kubelet registers (legacyregistry.MustRegister(ccimanager.Metrics()...)).
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{admitDuration, addDuration, admissionDuration}
}

func observeDriverAdmit(driver string, d time.Duration, outcome string) {
	admitDuration.WithLabelValues(driver, outcome).Observe(d.Seconds())
}

func observeAdmission(d time.Duration, outcome string) {
	admissionDuration.WithLabelValues(outcome).Observe(d.Seconds())
}

func observeDriverAdd(driver string, d time.Duration, outcome string) {
	addDuration.WithLabelValues(driver, outcome).Observe(d.Seconds())
}
