// SHA-256 against FIPS 180-4's examples (and the padding boundaries at 55, 56 and 64 bytes),
// HMAC-SHA256 against every RFC 4231 test case and the empty key and message, and the
// comparison against a difference in each byte.
#include "agentkv/service/common/hmac_sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace agentkv::service {
namespace {

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

std::string Repeat(int byte, size_t n) { return std::string(n, static_cast<char>(byte)); }

TEST(Sha256Test, MatchesFipsExamplesAndPaddingBoundaries) {
  EXPECT_EQ(HexDigest(Sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HexDigest(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexDigest(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(HexDigest(Sha256(std::string(1'000'000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(HexDigest(Sha256(std::string(55, 'a'))),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(HexDigest(Sha256(std::string(56, 'a'))),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(HexDigest(Sha256(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(HmacSha256Test, MatchesRfc4231TestCases) {
  // Test case 1.
  EXPECT_EQ(HexDigest(HmacSha256(Repeat(0x0b, 20), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2: a key shorter than the output.
  EXPECT_EQ(HexDigest(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 3.
  EXPECT_EQ(HexDigest(HmacSha256(Repeat(0xaa, 20), Repeat(0xdd, 50))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 4.
  EXPECT_EQ(HexDigest(HmacSha256(Bytes({1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13,
                                        14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25}),
                                 Repeat(0xcd, 50))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 5: the RFC gives the first 128 bits.
  EXPECT_EQ(HexDigest(HmacSha256(Repeat(0x0c, 20), "Test With Truncation")).substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // Test cases 6 and 7: a key longer than the block is hashed first.
  EXPECT_EQ(HexDigest(HmacSha256(Repeat(0xaa, 131),
                                 "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(HexDigest(HmacSha256(
                Repeat(0xaa, 131),
                "This is a test using a larger than block-size key and a larger than block-size "
                "data. The key needs to be hashed before being used by the HMAC algorithm.")),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256Test, EmptyKeysAndMessagesAndTheBlockSizeBoundary) {
  // Reference values from Python's hmac module.
  EXPECT_EQ(HexDigest(HmacSha256("", "")),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  EXPECT_EQ(HexDigest(HmacSha256("key", "")),
            "5d5d139563c95b5967b9bd9a8c9b233a9dedb45072794cd232dc1b74832607d0");
  EXPECT_EQ(HexDigest(HmacSha256("", "The quick brown fox jumps over the lazy dog")),
            "fb011e6154a19b9a4c767373c305275a5a69e8b68b0b4c9200c383dced19a416");
  // A 64-byte key is used as it is; a 65-byte one is hashed first.
  EXPECT_EQ(HexDigest(HmacSha256(std::string(64, 'k'), "msg")),
            "d62ad25bb128e96ab6ef43464aaf2bb91b5b85f013381e9ba6be747e8d0911b2");
  EXPECT_EQ(HexDigest(HmacSha256(std::string(65, 'k'), "msg")),
            "c65585780e821bd312cfaa440c33cb28d6af6b323d4977ae83934834ce589e38");
}

TEST(DigestsEqualTest, ADifferenceInAnyByteIsUnequal) {
  const Sha256Digest digest = Sha256("abc");
  EXPECT_TRUE(DigestsEqual(digest, digest));
  for (size_t i = 0; i < digest.size(); ++i) {
    Sha256Digest other = digest;
    other[i] ^= 0x01;
    EXPECT_FALSE(DigestsEqual(digest, other)) << "byte " << i;
  }
}

TEST(HexDigestTest, ParsesEitherCaseAndRejectsEverythingElse) {
  const Sha256Digest digest = Sha256("abc");
  const std::string hex = HexDigest(digest);
  ASSERT_TRUE(ParseHexDigest(hex).has_value());
  EXPECT_TRUE(DigestsEqual(*ParseHexDigest(hex), digest));
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_TRUE(ParseHexDigest(upper).has_value());
  EXPECT_TRUE(DigestsEqual(*ParseHexDigest(upper), digest));
  EXPECT_FALSE(ParseHexDigest(hex.substr(1)).has_value());
  EXPECT_FALSE(ParseHexDigest(hex + "0").has_value());
  EXPECT_FALSE(ParseHexDigest("zz" + hex.substr(2)).has_value());
  EXPECT_FALSE(DigestsEqual(Sha256("abc"), Sha256("abd")));
}

}  // namespace
}  // namespace agentkv::service
