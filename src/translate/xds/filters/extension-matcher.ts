// Envoy's ExtensionWithMatcher (envoy.extensions.common.matching.v3) wrapping an HTTP filter with a matcher whose
// SkipFilter action (envoy.extensions.filters.common.matcher.action.v3) skips the filter for a request: the only
// per-request switch Envoy has for a filter such as ext_proc. Not in the generated API set of src/gen, so the three
// messages are described here at load time (field numbers as in Envoy's protos).

import { create, createFileRegistry, type DescMessage } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { file_envoy_config_core_v3_extension } from "../../../gen/envoy/config/core/v3/extension_pb.js";
import { file_xds_type_matcher_v3_matcher } from "../../../gen/xds/type/matcher/v3/matcher_pb.js";

const TYPE_MESSAGE = 11;
const LABEL_OPTIONAL = 1;
const MATCHING = "envoy.extensions.common.matching.v3";
const ACTION = "envoy.extensions.filters.common.matcher.action.v3";

const message = (name: string, typeName: string, number: number, jsonName: string) => ({
  name,
  number,
  type: TYPE_MESSAGE,
  label: LABEL_OPTIONAL,
  typeName,
  jsonName,
});

const matchingFile = create(FileDescriptorProtoSchema, {
  name: "envoy/extensions/common/matching/v3/extension_matcher.proto",
  package: MATCHING,
  syntax: "proto3",
  dependency: ["envoy/config/core/v3/extension.proto", "xds/type/matcher/v3/matcher.proto"],
  messageType: [
    {
      name: "ExtensionWithMatcher",
      field: [
        message("extension_config", ".envoy.config.core.v3.TypedExtensionConfig", 2, "extensionConfig"),
        message("xds_matcher", ".xds.type.matcher.v3.Matcher", 3, "xdsMatcher"),
      ],
    },
    {
      name: "ExtensionWithMatcherPerRoute",
      field: [message("xds_matcher", ".xds.type.matcher.v3.Matcher", 1, "xdsMatcher")],
    },
  ],
});

const actionFile = create(FileDescriptorProtoSchema, {
  name: "envoy/extensions/filters/common/matcher/action/v3/skip_action.proto",
  package: ACTION,
  syntax: "proto3",
  messageType: [{ name: "SkipFilter" }],
});

const deps: Record<string, unknown> = {
  "envoy/config/core/v3/extension.proto": file_envoy_config_core_v3_extension,
  "xds/type/matcher/v3/matcher.proto": file_xds_type_matcher_v3_matcher,
};
const matching = createFileRegistry(matchingFile, (name) => deps[name] as never);

function get(registry: ReturnType<typeof createFileRegistry>, name: string): DescMessage {
  const d = registry.getMessage(name);
  if (d === undefined) throw new Error(`${name} is not described`);
  return d;
}

export const ExtensionWithMatcherSchema = get(matching, `${MATCHING}.ExtensionWithMatcher`);
export const ExtensionWithMatcherPerRouteSchema = get(matching, `${MATCHING}.ExtensionWithMatcherPerRoute`);
export const SkipFilterSchema = get(
  createFileRegistry(actionFile, () => undefined),
  `${ACTION}.SkipFilter`,
);
