# frozen_string_literal: true

# ruby-prof's method names in hakari's form, for the benches that compare call counts.
module RubyProfNames
  module_function

  # {full name => calls} of a ruby-prof result. ruby-prof names singleton methods
  # "<Class::X>#m" and "<Module::X>#m"; hakari says "X.m". skip: names that are no call
  # the workload made (ruby-prof's root, the method it finds running when it starts).
  def counts(result, skip: ["[global]#"])
    out = Hash.new(0)
    result.threads.each do |t|
      t.methods.each do |m|
        next if skip.include?(m.full_name)

        out[m.full_name.sub(/\A<(?:Class|Module)::(.+?)>#/, '\1.')] += m.called
      end
    end
    out
  end

  # hakari names a method by its definition (owner and original name, as the VM's frames
  # do); ruby-prof by the name it was called by, so each alias is a method of its own there.
  # Folding ruby-prof's aliases into their original names tells a naming difference from a
  # counting one.
  def by_definition(counts)
    counts.each_with_object(Hash.new(0)) { |(name, calls), out| out[original_name(name)] += calls }
  end

  def original_name(name)
    owner, sep, meth = name.rpartition(/[#.]/)
    mod = Object.const_get(owner)
    mod = mod.singleton_class if sep == "."
    "#{owner}#{sep}#{mod.instance_method(meth).original_name}"
  rescue NameError, TypeError
    name # an anonymous owner or a method gone since: keep ruby-prof's name
  end
end
