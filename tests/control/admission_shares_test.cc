// AdmissionShares: the per-session and per-client bounds of the admission ceiling.
#include "agentkv/control/admission_shares.h"

#include <gtest/gtest.h>

namespace agentkv::control {
namespace {

TEST(AdmissionSharesTest, AHolderIsOverOnlyWhenItHoldsALeaseAndWouldPassItsBound) {
  AdmissionShares shares(ShareLimits{.session_share = 0.5, .client_share = 0.8});
  const ShareHolder a{"tenant", "s1"};
  // Nothing held: never over, whatever the size (a first lease runs alone if it must).
  EXPECT_EQ(shares.Check(a, 5000, 1000), ShareExcess::kNone);
  shares.Charge("l1", a, 400);
  EXPECT_EQ(shares.Check(a, 100, 1000), ShareExcess::kNone);     // 500: at the bound.
  EXPECT_EQ(shares.Check(a, 101, 1000), ShareExcess::kSession);  // 501 > 500.
  const ShareHolder b{"tenant", "s2"};
  EXPECT_EQ(shares.Check(b, 300, 1000), ShareExcess::kNone);  // Client: 700 <= 800.
  shares.Charge("l2", b, 300);
  EXPECT_EQ(shares.Check(b, 101, 1000), ShareExcess::kClient);  // Client: 801 > 800.
  EXPECT_EQ(shares.Check(ShareHolder{}, 10'000, 1000), ShareExcess::kNone);
  EXPECT_EQ(shares.Check(a, 101, 0), ShareExcess::kNone);  // No ceiling: the ledger decides.
  EXPECT_EQ(shares.Bound(ShareExcess::kClient, 1000), 800);
  EXPECT_EQ(shares.client_held("tenant"), 700);
  EXPECT_TRUE(shares.CheckInvariants().ok());
  shares.Release("l1");
  shares.Release("l1");  // Idempotent.
  EXPECT_EQ(shares.session_held("s1"), 0);
  EXPECT_EQ(shares.client_held("tenant"), 300);
  EXPECT_EQ(shares.leases(), 1);
  shares.Charge("anonymous", ShareHolder{}, 50);  // Names nobody: not recorded.
  EXPECT_EQ(shares.leases(), 1);
  EXPECT_TRUE(shares.CheckInvariants().ok());
}

}  // namespace
}  // namespace agentkv::control
