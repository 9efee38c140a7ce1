package resolver

// The kernel's address flags and route scope (linux/if_addr.h, rtnetlink.h), spelled here so the
// resolver builds on every platform; TestKernelFlagsMatchLinux checks them against x/sys/unix.
const (
	scopeUniverse = 0 // RT_SCOPE_UNIVERSE

	ifaSecondary      = 0x01  // IFA_F_SECONDARY
	ifaTemporary      = 0x01  // IFA_F_TEMPORARY: the same bit, named for IPv6
	ifaOptimistic     = 0x04  // IFA_F_OPTIMISTIC
	ifaDADFailed      = 0x08  // IFA_F_DADFAILED
	ifaDeprecated     = 0x20  // IFA_F_DEPRECATED
	ifaTentative      = 0x40  // IFA_F_TENTATIVE
	ifaManageTempAddr = 0x100 // IFA_F_MANAGETEMPADDR
)
