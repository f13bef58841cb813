# frozen_string_literal: true

# The statistics of the benches that compare setups run round by round. The host's speed
# drifts by several percent over seconds (a VM with neighbours), far more than the 1 % looked
# for. Runs of one round are close in time, so a slowdown is judged on each round's own ratio
# (setup / baseline of the same round), and the median of those ratios is reported with its
# interquartile range and its 95 % confidence interval.
module PairedStats
  module_function

  def median(xs) = xs.sort[xs.size / 2]
  def pct(ratio) = format("%+6.2f%%", 100.0 * (ratio - 1))
  def iqr(xs) = (s = xs.sort; format("%s..%s", pct(s[s.size / 4]), pct(s[(s.size * 3) / 4])).gsub(" ", ""))

  # 95 % confidence interval of a median, from the order statistics of the sorted sample
  def median_ci(xs)
    s = xs.sort
    half = 0.98 * Math.sqrt(s.size)
    lo = [(s.size / 2.0 - half).floor, 0].max
    hi = [(s.size / 2.0 + half).ceil, s.size - 1].min
    format("%s..%s", pct(s[lo]), pct(s[hi])).gsub(" ", "")
  end
end
