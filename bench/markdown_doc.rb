# frozen_string_literal: true

# The kramdown benches' document: deterministic markdown with headers, paragraphs with span
# elements, nested and ordered lists, fenced code, aligned tables and block quotes — the same
# every run.
module MarkdownDoc
  WORDS = %w[scale weigh hook frame clock event thread fiber method return counter table buffer string tree
             node path sample trace ruby kernel vector median floor budget].freeze
  def self.words(seed, n) = Array.new(n) { |k| WORDS[(seed * 31 + k * 17 + k * k) % WORDS.size] }.join(" ")

  def self.document(sections)
    out = +""
    sections.times do |s|
      out << "#{'#' * (1 + s % 3)} Section #{s}: #{words(s, 3)}\n\n"
      out << "#{words(s, 14).capitalize}, with *emphasis*, **strong #{s}**, `code_#{s}()` and " \
             "[a link](https://example.com/#{s} \"title #{s}\"). #{words(s + 1, 10)}.\n\n"
      3.times { |k| out << "#{k.even? ? '-' : '*'} item #{k}: #{words(s + k, 5)} _#{WORDS[k]}_\n" }
      out << "    - nested #{words(s, 3)}\n\n"
      2.times { |k| out << "#{k + 1}. step #{words(s * 2 + k, 4)} &amp; more\n" }
      out << "\n~~~ ruby\ndef m#{s}(x)\n  x * #{s} + #{s % 7}\nend\n~~~\n\n"
      out << "| name | value | note |\n|------|------:|:----:|\n"
      3.times { |r| out << "| #{WORDS[(s + r) % WORDS.size]} | #{s * r} | *#{words(r, 2)}* |\n" }
      out << "\n> #{words(s + 2, 12)}\n> second line with `code`\n\n"
    end
    out
  end
end
