# frozen_string_literal: true

# Turns the flame graph's page (flamegraph.html) into a C source defining it as a string,
# hk_flamegraph_html, for html_encode.c: the page is kept as HTML, to be read and edited as
# one, and embedded at build time (extconf.rb's Makefile rule, test/c/Makefile).
#   ruby embed_html.rb flamegraph.html flamegraph_html.c
src, dst = ARGV
abort "usage: ruby embed_html.rb PAGE.html OUT.c" unless src && dst
page = File.binread(src)
abort "#{src} has no /*HAKARI_DATA*/ placeholder" unless page.include?("/*HAKARI_DATA*/")
lines = page.each_line.map do |line|
  body = line.bytes.map { |b| b == 0x22 || b == 0x5c ? "\\#{b.chr}" : (b < 0x20 || b > 0x7e ? format("\\%03o", b) : b.chr) }.join
  "    \"#{body}\""
end
tmp = "#{dst}.tmp"
File.write(tmp, <<~C)
  /* Generated from #{File.basename(src)} by embed_html.rb at build time: edit the page, not this. */
  #include <stddef.h>
  extern const char hk_flamegraph_html[];
  extern const size_t hk_flamegraph_html_len;
  const char hk_flamegraph_html[] =
  #{lines.join("\n")};
  const size_t hk_flamegraph_html_len = sizeof(hk_flamegraph_html) - 1;
C
File.rename(tmp, dst)
