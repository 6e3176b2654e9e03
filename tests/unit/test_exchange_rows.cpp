// The DF exchange's row lists (chem/scf/exchange_rows.hpp): gathered row by row over the stored pairs only, K is the
// dense K of the unpacked tensor, and rows are grouped only with rows of the same partners.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include <Eigen/Dense>

#include "chem/scf/exchange_rows.hpp"

namespace {

using dfmp2::chem::ExchangeRows;
using dfmp2::linalg::Index;
using Matrix = Eigen::MatrixXd;

// A packed layout like the three-centre engine's: shell pairs (sm >= sn) in order, those not in `kept` skipped,
// functions m >= n within a diagonal pair.
struct Layout {
  std::vector<int> m, n;
  Index nbf = 0;
};
Layout packed_layout(const std::vector<int>& shell_sizes, const std::vector<std::vector<bool>>& kept) {
  Layout l;
  std::vector<int> offset;
  for (int size : shell_sizes) {
    offset.push_back(static_cast<int>(l.nbf));
    l.nbf += size;
  }
  for (std::size_t sm = 0; sm < shell_sizes.size(); ++sm)
    for (std::size_t sn = 0; sn <= sm; ++sn) {
      if (!kept[sm][sn]) continue;
      for (int fm = 0; fm < shell_sizes[sm]; ++fm)
        for (int fn = 0; fn < shell_sizes[sn]; ++fn) {
          if (sm == sn && fn > fm) continue;
          l.m.push_back(offset[sm] + fm);
          l.n.push_back(offset[sn] + fn);
        }
    }
  return l;
}

TEST(ExchangeRows, GatheredRowsGiveTheDenseExchange) {
  const std::vector<int> shells = {1, 3, 1, 5, 3, 1, 1, 3, 5};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::vector<bool>> kept(shells.size(), std::vector<bool>(shells.size(), true));
  for (std::size_t a = 0; a < shells.size(); ++a)
    for (std::size_t b = 0; b < a; ++b) kept[a][b] = (a + 2 * b) % 3 != 0;  // about a third screened out
  const Layout l = packed_layout(shells, kept);
  const Index nbf = l.nbf, npacked = static_cast<Index>(l.m.size()), q = 7, nocc = 4;

  // B packed pairs-fastest (as fitted), its unpacked squares, and the occupied coefficients.
  std::vector<double> b(static_cast<std::size_t>(npacked * q));
  for (double& v : b) v = u(rng);
  std::vector<Matrix> squares(static_cast<std::size_t>(q), Matrix::Zero(nbf, nbf));
  for (Index p = 0; p < q; ++p)
    for (Index x = 0; x < npacked; ++x)
      squares[static_cast<std::size_t>(p)](l.m[x], l.n[x]) = squares[static_cast<std::size_t>(p)](l.n[x], l.m[x]) =
          b[static_cast<std::size_t>(x + npacked * p)];
  const Matrix c = Matrix::Random(nbf, nocc);
  Matrix k_dense = Matrix::Zero(nbf, nbf);
  for (const Matrix& s : squares) k_dense += (s * c) * (s * c).transpose();

  std::vector<double> bt(b.size());
  dfmp2::chem::transpose_block(b.data(), npacked, q, bt.data());
  for (Index x = 0; x < npacked; ++x)
    for (Index p = 0; p < q; ++p)
      ASSERT_EQ(bt[static_cast<std::size_t>(p + q * x)], b[static_cast<std::size_t>(x + npacked * p)]);

  const ExchangeRows rows(l.m, l.n, nbf);
  EXPECT_EQ(rows.entries(), double(2 * npacked - nbf));
  const Matrix c_t = c.transpose();
  Matrix e(nocc * q, nbf);
  Index covered = 0;
  for (const auto& g : rows.groups()) {
    EXPECT_EQ(g.first, covered);
    EXPECT_LE(g.rows, ExchangeRows::kMaxRows);
    covered += g.rows;
    std::vector<double> s(static_cast<std::size_t>(q * g.rows * g.partners)), occ(static_cast<std::size_t>(nocc * g.partners));
    rows.gather_block<double>(g, bt.data(), q, s.data(), true);
    rows.gather_occupied<double>(g, c_t.data(), nocc, occ.data());
    const Eigen::Map<const Matrix> sm(s.data(), q * g.rows, g.partners), om(occ.data(), nocc, g.partners);
    const Matrix block = om * sm.transpose();  // nocc x (q rows)
    for (Index r = 0; r < g.rows; ++r)
      e.col(g.first + r) = Eigen::Map<const Eigen::VectorXd>(block.data() + r * q * nocc, q * nocc);
  }
  EXPECT_EQ(covered, nbf);
  const Matrix k = e.transpose() * e;
  EXPECT_LT((k - k_dense).cwiseAbs().maxCoeff(), 1e-12 * k_dense.cwiseAbs().maxCoeff());

  // fp32: the same from B rounded as it is gathered.
  const auto& g = rows.groups().front();
  std::vector<float> sf(static_cast<std::size_t>(q * g.rows * g.partners));
  rows.gather_block<float>(g, bt.data(), q, sf.data(), false);
  std::vector<double> sd(sf.size());
  rows.gather_block<double>(g, bt.data(), q, sd.data(), false);
  for (std::size_t i = 0; i < sf.size(); ++i) EXPECT_EQ(sf[i], static_cast<float>(sd[i]));
}

TEST(ExchangeRows, RowsGroupOnlyWithTheSamePartners) {
  // Two shells of 3 and one of 20 functions, all pairs kept except (2, 0): the first shell's rows and the second's
  // have different partners; the third shell's 20 rows share theirs but make two groups (at most kMaxRows).
  std::vector<std::vector<bool>> kept(3, std::vector<bool>(3, true));
  kept[2][0] = false;
  const Layout l = packed_layout({3, 3, 20}, kept);
  const ExchangeRows rows(l.m, l.n, l.nbf);
  std::vector<std::pair<Index, Index>> groups;  // (rows, partners)
  for (const auto& g : rows.groups()) groups.emplace_back(g.rows, g.partners);
  const std::vector<std::pair<Index, Index>> expected = {{3, 6}, {3, 26}, {16, 23}, {4, 23}};
  EXPECT_EQ(groups, expected);
  EXPECT_EQ(rows.max_gathered(), 16 * 23);
}

}  // namespace
