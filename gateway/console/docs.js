// Draws /openapi.json as a page: the operations by tag, then the schemas. No framework, nothing
// from elsewhere (the page's Content-Security-Policy allows only this gateway); text is set with
// textContent, never as HTML.
"use strict";

function element(tag, properties, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, properties || {});
  for (const child of children) {
    node.append(child);
  }
  return node;
}

function code(text) {
  return element("code", { textContent: text });
}

function schemaBlock(schema) {
  return element("pre", { textContent: JSON.stringify(schema, null, 2) });
}

function refName(schema) {
  return schema && schema.$ref ? schema.$ref.split("/").pop() : null;
}

function schemaLink(schema) {
  const name = refName(schema);
  if (name) {
    return element("a", { href: `#schema-${name}`, textContent: name });
  }
  return code(JSON.stringify(schema));
}

function parametersTable(parameters) {
  const rows = parameters.map((p) =>
    element(
      "tr",
      {},
      element("td", {}, code(p.name)),
      element("td", { textContent: p.in }),
      element("td", { textContent: p.required ? "required" : "optional" }),
      element("td", { textContent: p.description || "" }, " ", code(JSON.stringify(p.schema))),
    ),
  );
  return element("table", {}, ...rows);
}

function operationSection(path, method, operation) {
  const section = element("section", { className: "operation", id: operation.operationId });
  section.append(
    element(
      "h3",
      {},
      element("span", { className: `method ${method}`, textContent: method.toUpperCase() }),
      code(path),
    ),
    element("p", { textContent: operation.summary || "" }),
  );
  const security = (operation.security || []).map((s) => Object.keys(s).join(" + ")).join(" or ");
  section.append(element("p", {}, "Credentials: ", security ? code(security) : "none"));
  if (operation.parameters && operation.parameters.length) {
    section.append(element("h4", { textContent: "Parameters" }), parametersTable(operation.parameters));
  }
  if (operation.requestBody) {
    const bodies = Object.entries(operation.requestBody.content).map(([type, media]) =>
      element("li", {}, code(type), " ", schemaLink(media.schema)),
    );
    section.append(element("h4", { textContent: "Body" }), element("ul", {}, ...bodies));
  }
  const answers = Object.entries(operation.responses).map(([status, answer]) => {
    const types = Object.entries(answer.content || {}).map(([type, media]) =>
      element("span", {}, " ", code(type), " ", schemaLink(media.schema)),
    );
    return element("tr", {}, element("td", {}, code(status)), element("td", { textContent: answer.description }, ...types));
  });
  section.append(element("h4", { textContent: "Answers" }), element("table", {}, ...answers));
  return section;
}

function draw(spec) {
  const byTag = new Map();
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const tag = (operation.tags || ["other"])[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push([path, method, operation]);
    }
  }
  const main = document.getElementById("operations");
  const toc = document.getElementById("toc");
  main.replaceChildren();
  const contents = element("ul");
  for (const [tag, operations] of byTag) {
    main.append(element("h2", { id: `tag-${tag}`, textContent: tag }));
    for (const [path, method, operation] of operations) {
      main.append(operationSection(path, method, operation));
      contents.append(
        element("li", {}, element("a", { href: `#${operation.operationId}`, textContent: `${method.toUpperCase()} ${path}` })),
      );
    }
  }
  toc.replaceChildren(element("h2", { textContent: "Operations" }), contents);
  const schemas = document.getElementById("schemas");
  schemas.append(element("h2", { textContent: "Schemas" }));
  for (const [name, schema] of Object.entries(spec.components.schemas)) {
    schemas.append(
      element(
        "details",
        { id: `schema-${name}` },
        element("summary", {}, code(name)),
        schemaBlock(schema),
      ),
    );
  }
  for (const link of document.querySelectorAll('a[href^="#schema-"]')) {
    link.addEventListener("click", () => {
      const target = document.getElementById(link.getAttribute("href").slice(1));
      if (target) target.open = true;
    });
  }
}

fetch("/openapi.json")
  .then((response) => response.json())
  .then(draw)
  .catch((error) => {
    document.getElementById("operations").replaceChildren(
      element("p", { textContent: `The description could not be read: ${error}` }),
    );
  });
