package resolver

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestKernelFlagsMatchLinux(t *testing.T) {
	for _, c := range []struct {
		name       string
		got, linux int
	}{
		{"RT_SCOPE_UNIVERSE", scopeUniverse, unix.RT_SCOPE_UNIVERSE},
		{"IFA_F_SECONDARY", ifaSecondary, unix.IFA_F_SECONDARY},
		{"IFA_F_TEMPORARY", ifaTemporary, unix.IFA_F_TEMPORARY},
		{"IFA_F_OPTIMISTIC", ifaOptimistic, unix.IFA_F_OPTIMISTIC},
		{"IFA_F_DADFAILED", ifaDADFailed, unix.IFA_F_DADFAILED},
		{"IFA_F_DEPRECATED", ifaDeprecated, unix.IFA_F_DEPRECATED},
		{"IFA_F_TENTATIVE", ifaTentative, unix.IFA_F_TENTATIVE},
		{"IFA_F_MANAGETEMPADDR", ifaManageTempAddr, unix.IFA_F_MANAGETEMPADDR},
	} {
		if c.got != c.linux {
			t.Errorf("%s = %#x, linux has %#x", c.name, c.got, c.linux)
		}
	}
}
