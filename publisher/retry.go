package publisher

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// retryBackoff is the backoff of failed writes and reads: exponential from min, doubling up to max,
// each delay stretched by up to half at random (wait.Jitter). Without the jitter, every agent of a
// fleet that lost the API server at the same moment would retry at the same moments when it comes
// back. Step returns the next delay; a fresh value starts over.
func retryBackoff(min, max time.Duration) wait.Backoff {
	return wait.Backoff{Duration: min, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: max}
}
