// Envoy's ext_proc processing request modifier `MappedAttributeBuilder`
// (envoy.extensions.http.ext_proc.processing_request_modifiers.mapped_attribute_builder.v3): attributes sent to the
// processor under names of the policy's choosing, each the value of an Envoy CEL expression (Envoy's own
// request_attributes are keyed by the expression text). Not in the generated API set of src/gen, so the message is
// described here at load time (field numbers as in Envoy's proto: 1 and 2, both map<string, string>).

import { create, createFileRegistry, type DescMessage } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

const PACKAGE = "envoy.extensions.http.ext_proc.processing_request_modifiers.mapped_attribute_builder.v3";
const TYPE_STRING = 9;
const TYPE_MESSAGE = 11;
const LABEL_OPTIONAL = 1;
const LABEL_REPEATED = 3;

const entry = (name: string) => ({
  name,
  field: [
    { name: "key", number: 1, type: TYPE_STRING, label: LABEL_OPTIONAL, jsonName: "key" },
    { name: "value", number: 2, type: TYPE_STRING, label: LABEL_OPTIONAL, jsonName: "value" },
  ],
  options: { mapEntry: true },
});

const mapField = (name: string, number: number, jsonName: string, entryName: string) => ({
  name,
  number,
  type: TYPE_MESSAGE,
  label: LABEL_REPEATED,
  typeName: `.${PACKAGE}.MappedAttributeBuilder.${entryName}`,
  jsonName,
});

const file = create(FileDescriptorProtoSchema, {
  name: "envoy/extensions/http/ext_proc/processing_request_modifiers/mapped_attribute_builder/v3/mapped_attribute_builder.proto",
  package: PACKAGE,
  syntax: "proto3",
  messageType: [
    {
      name: "MappedAttributeBuilder",
      field: [
        mapField("mapped_request_attributes", 1, "mappedRequestAttributes", "MappedRequestAttributesEntry"),
        mapField("mapped_response_attributes", 2, "mappedResponseAttributes", "MappedResponseAttributesEntry"),
      ],
      nestedType: [entry("MappedRequestAttributesEntry"), entry("MappedResponseAttributesEntry")],
    },
  ],
});

export const MappedAttributeBuilderSchema: DescMessage = createFileRegistry(file, () => undefined).getMessage(
  `${PACKAGE}.MappedAttributeBuilder`,
)!;

/** The extension's name in a TypedExtensionConfig. */
export const MAPPED_ATTRIBUTE_BUILDER = "envoy.extensions.http.ext_proc.mapped_attribute_builder";
