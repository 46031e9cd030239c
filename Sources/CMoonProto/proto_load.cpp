// mw.protobuf.load's C++ half: libprotobuf's parser and descriptors, flattened
// into the C schema of CMoonProto.h. Nothing here touches Lua, and no C++
// exception leaves mwp_load: errors come back as text.
#include "CMoonProto.h"

#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor_database.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace pb = google::protobuf;

namespace {

// Parse and validation errors, as protoc prints them: file:line:column: text.
class Errors : public pb::compiler::MultiFileErrorCollector {
  public:
    std::string text;
    void AddError(const std::string &file, int line, int column, const std::string &message) override {
        if (!text.empty()) text += "\n";
        text += file;
        if (line >= 0) text += ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1);
        text += ": " + message;
    }
    void AddWarning(const std::string &, int, int, const std::string &) override {}
};

char *copy_text(const std::string &s) {
    char *out = static_cast<char *>(std::malloc(s.size() + 1));
    if (out) std::memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

struct Flattener {
    std::vector<const pb::Descriptor *> messages;
    std::vector<const pb::EnumDescriptor *> enums;
    std::unordered_map<const pb::Descriptor *, int32_t> message_index;
    std::unordered_map<const pb::EnumDescriptor *, int32_t> enum_index;
    std::unordered_map<const pb::FileDescriptor *, bool> files_seen;
    std::unordered_map<std::string, uint32_t> name_ids;
    std::vector<std::string> names;
    std::string arena;

    void add_enum(const pb::EnumDescriptor *e) {
        enum_index.emplace(e, (int32_t)enums.size());
        enums.push_back(e);
    }
    void add_message(const pb::Descriptor *d) {
        message_index.emplace(d, (int32_t)messages.size());
        messages.push_back(d);
        for (int i = 0; i < d->enum_type_count(); i++) add_enum(d->enum_type(i));
        for (int i = 0; i < d->nested_type_count(); i++) add_message(d->nested_type(i));
    }
    void add_file(const pb::FileDescriptor *f) {
        if (files_seen.count(f)) return;
        files_seen[f] = true;
        for (int i = 0; i < f->dependency_count(); i++) add_file(f->dependency(i));
        for (int i = 0; i < f->enum_type_count(); i++) add_enum(f->enum_type(i));
        for (int i = 0; i < f->message_type_count(); i++) add_message(f->message_type(i));
    }
    uint32_t name_id(const std::string &name) {
        auto it = name_ids.find(name);
        if (it != name_ids.end()) return it->second;
        names.push_back(name);
        uint32_t id = (uint32_t)names.size();
        name_ids.emplace(name, id);
        return id;
    }
    // Strings go to the arena as offsets first (it grows), pointers at the end.
    size_t text(const std::string &s) {
        size_t at = arena.size();
        arena.append(s);
        arena.push_back('\0');
        return at;
    }
};

mwp_schema *flatten(Flattener &fl) {
    mwp_schema *s = static_cast<mwp_schema *>(std::calloc(1, sizeof(mwp_schema)));
    if (!s) return nullptr;
    s->nmessages = (uint32_t)fl.messages.size();
    s->nenums = (uint32_t)fl.enums.size();
    s->messages = static_cast<mwp_message *>(std::calloc(s->nmessages + 1, sizeof(mwp_message)));
    s->enums = static_cast<mwp_enum *>(std::calloc(s->nenums + 1, sizeof(mwp_enum)));
    if (!s->messages || !s->enums) { mwp_schema_free(s); return nullptr; }
    // Offsets of strings, turned into pointers once the arena is complete.
    std::vector<std::pair<const char **, size_t>> fix;

    for (uint32_t m = 0; m < s->nmessages; m++) {
        const pb::Descriptor *d = fl.messages[m];
        mwp_message *out = &s->messages[m];
        fix.emplace_back(&out->full_name, fl.text(d->full_name()));
        out->map_entry = d->options().map_entry() ? 1 : 0;
        std::vector<const pb::FieldDescriptor *> fields;
        for (int i = 0; i < d->field_count(); i++) fields.push_back(d->field(i));
        std::sort(fields.begin(), fields.end(),
                  [](const pb::FieldDescriptor *a, const pb::FieldDescriptor *b) { return a->number() < b->number(); });
        out->nfields = (uint32_t)fields.size();
        out->fields = static_cast<mwp_field *>(std::calloc(out->nfields + 1, sizeof(mwp_field)));
        if (!out->fields) { mwp_schema_free(s); return nullptr; }
        std::vector<const pb::OneofDescriptor *> oneofs;
        for (int i = 0; i < d->oneof_decl_count(); i++)
            if (!d->oneof_decl(i)->is_synthetic()) oneofs.push_back(d->oneof_decl(i));
        out->noneofs = (uint32_t)oneofs.size();
        out->oneofs = static_cast<mwp_oneof *>(std::calloc(out->noneofs + 1, sizeof(mwp_oneof)));
        if (!out->oneofs) { mwp_schema_free(s); return nullptr; }
        for (uint32_t o = 0; o < out->noneofs; o++) {
            fix.emplace_back(&out->oneofs[o].name, fl.text(oneofs[o]->name()));
            out->oneofs[o].fields = static_cast<uint32_t *>(std::calloc((size_t)oneofs[o]->field_count() + 1, sizeof(uint32_t)));
            if (!out->oneofs[o].fields) { mwp_schema_free(s); return nullptr; }
        }
        uint32_t max_number = 0;
        for (uint32_t i = 0; i < out->nfields; i++) {
            const pb::FieldDescriptor *f = fields[i];
            mwp_field *of = &out->fields[i];
            fix.emplace_back(&of->name, fl.text(f->name()));
            of->number = (uint32_t)f->number();
            of->name_id = fl.name_id(f->name());
            of->type = (uint8_t)f->type();
            of->repeated = f->is_repeated() ? 1 : 0;
            of->packed = f->is_packed() ? 1 : 0;
            of->presence = f->has_presence() ? 1 : 0;
            of->utf8 = (f->type() == pb::FieldDescriptor::TYPE_STRING
                        && f->file()->syntax() == pb::FileDescriptor::SYNTAX_PROTO3) ? 1 : 0;
            of->map = f->is_map() ? 1 : 0;
            of->required = f->is_required() ? 1 : 0;
            of->oneof = -1;
            of->sub = -1;
            const pb::OneofDescriptor *o = f->containing_oneof();
            if (o && !o->is_synthetic()) {
                for (uint32_t k = 0; k < out->noneofs; k++)
                    if (oneofs[k] == o) {
                        of->oneof = (int32_t)k;
                        out->oneofs[k].fields[out->oneofs[k].count++] = i;
                    }
            }
            if (f->message_type()) of->sub = fl.message_index.at(f->message_type());
            if (f->enum_type()) of->sub = fl.enum_index.at(f->enum_type());
            if (of->number > max_number) max_number = of->number;
        }
        // Numbers up to 1024 (almost every schema) find their field by index.
        out->dense = std::min<uint32_t>(max_number, 1024) + 1;
        out->by_number = static_cast<uint16_t *>(std::calloc(out->dense, sizeof(uint16_t)));
        if (!out->by_number) { mwp_schema_free(s); return nullptr; }
        for (uint32_t i = 0; i < out->nfields && i < 65535; i++)
            if (out->fields[i].number < out->dense) out->by_number[out->fields[i].number] = (uint16_t)(i + 1);
    }
    for (uint32_t e = 0; e < s->nenums; e++) {
        const pb::EnumDescriptor *d = fl.enums[e];
        mwp_enum *out = &s->enums[e];
        fix.emplace_back(&out->full_name, fl.text(d->full_name()));
        out->closed = d->file()->syntax() == pb::FileDescriptor::SYNTAX_PROTO2 ? 1 : 0;
        out->ndeclared = (uint32_t)d->value_count();
        out->declared = static_cast<mwp_enum_value *>(std::calloc(out->ndeclared + 1, sizeof(mwp_enum_value)));
        out->values = static_cast<mwp_enum_value *>(std::calloc(out->ndeclared + 1, sizeof(mwp_enum_value)));
        if (!out->declared || !out->values) { mwp_schema_free(s); return nullptr; }
        for (uint32_t i = 0; i < out->ndeclared; i++) {
            const pb::EnumValueDescriptor *v = d->value((int)i);
            fix.emplace_back(&out->declared[i].name, fl.text(v->name()));
            out->declared[i].number = v->number();
            out->declared[i].name_id = fl.name_id(v->name());
        }
        // By number, the first declared name of each number.
        std::vector<uint32_t> order(out->ndeclared);
        for (uint32_t i = 0; i < out->ndeclared; i++) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
            return out->declared[a].number < out->declared[b].number;
        });
        for (uint32_t k = 0; k < out->ndeclared; k++) {
            const mwp_enum_value &v = out->declared[order[k]];
            if (out->nvalues > 0 && out->values[out->nvalues - 1].number == v.number) continue;
            out->values[out->nvalues++] = v; // its name is set once the arena is complete
        }
    }
    s->nnames = (uint32_t)fl.names.size();
    s->names = static_cast<const char **>(std::calloc(s->nnames + 1, sizeof(char *)));
    if (!s->names) { mwp_schema_free(s); return nullptr; }
    std::vector<size_t> name_at(s->nnames);
    for (uint32_t i = 0; i < s->nnames; i++) name_at[i] = fl.text(fl.names[i]);
    s->arena = static_cast<char *>(std::malloc(fl.arena.size() + 1));
    if (!s->arena) { mwp_schema_free(s); return nullptr; }
    std::memcpy(s->arena, fl.arena.data(), fl.arena.size());
    for (auto &p : fix) *p.first = s->arena + p.second;
    // Enum values by number share the declared entries' names.
    for (uint32_t e = 0; e < s->nenums; e++) {
        mwp_enum *en = &s->enums[e];
        for (uint32_t k = 0; k < en->nvalues; k++)
            for (uint32_t i = 0; i < en->ndeclared; i++)
                if (en->declared[i].number == en->values[k].number) {
                    en->values[k].name = en->declared[i].name;
                    break;
                }
    }
    for (uint32_t i = 0; i < s->nnames; i++) s->names[i] = s->arena + name_at[i];
    return s;
}

std::string dirname_of(const std::string &path) {
    size_t slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

mwp_schema *load(const char *const *files, size_t nfiles, const char *const *import_paths, size_t npaths,
                 std::string &error) {
    pb::compiler::DiskSourceTree tree;
    for (size_t i = 0; i < npaths; i++) tree.MapPath("", import_paths[i]);
    // Each file is named by its path under an import path; a file under none of
    // them brings its own directory in (after the given ones).
    std::vector<std::string> virtual_names;
    for (size_t i = 0; i < nfiles; i++) {
        std::string virtual_name, shadowing;
        auto found = tree.DiskFileToVirtualFile(files[i], &virtual_name, &shadowing);
        if (found == pb::compiler::DiskSourceTree::SHADOWED) {
            error = std::string(files[i]) + ": shadowed by " + shadowing + " (an earlier import path has a file of the same name)";
            return nullptr;
        }
        if (found != pb::compiler::DiskSourceTree::SUCCESS && access(files[i], F_OK) != 0) {
            // Not a file: an import name, such as google/protobuf/struct.proto (the
            // well-known types come from the library when no import path has them).
            virtual_name = files[i];
        } else if (found != pb::compiler::DiskSourceTree::SUCCESS) {
            std::string path = files[i];
            tree.MapPath("", dirname_of(path));
            size_t slash = path.rfind('/');
            virtual_name = slash == std::string::npos ? path : path.substr(slash + 1);
        }
        virtual_names.push_back(virtual_name);
    }
    // The well-known types (google/protobuf/*.proto) come from libprotobuf's own
    // compiled-in descriptors when no import path has them.
    pb::DescriptorPoolDatabase builtin(*pb::DescriptorPool::generated_pool());
    pb::compiler::SourceTreeDescriptorDatabase database(&tree, &builtin);
    Errors errors;
    database.RecordErrorsTo(&errors);
    pb::DescriptorPool pool(&database, database.GetValidationErrorCollector());
    Flattener fl;
    for (size_t i = 0; i < nfiles; i++) {
        const pb::FileDescriptor *file = pool.FindFileByName(virtual_names[i]);
        if (!file) {
            error = errors.text.empty() ? std::string(files[i]) + ": could not be loaded" : errors.text;
            return nullptr;
        }
        fl.add_file(file);
    }
    mwp_schema *s = flatten(fl);
    if (!s) error = "out of memory";
    return s;
}

} // namespace

extern "C" mwp_schema *mwp_load(const char *const *files, size_t nfiles, const char *const *import_paths,
                                size_t npaths, char **error) {
    std::string text;
    mwp_schema *s = nullptr;
    try {
        s = load(files, nfiles, import_paths, npaths, text);
    } catch (const std::exception &e) {
        text = std::string("loading the .proto files failed: ") + e.what();
        s = nullptr;
    } catch (...) {
        text = "loading the .proto files failed";
        s = nullptr;
    }
    if (!s) *error = copy_text(text.empty() ? std::string("loading the .proto files failed") : text);
    return s;
}

extern "C" void mwp_schema_free(mwp_schema *s) {
    if (!s) return;
    if (s->messages) {
        for (uint32_t m = 0; m < s->nmessages; m++) {
            mwp_message *msg = &s->messages[m];
            std::free(msg->fields);
            std::free(msg->by_number);
            if (msg->oneofs)
                for (uint32_t o = 0; o < msg->noneofs; o++) std::free(msg->oneofs[o].fields);
            std::free(msg->oneofs);
        }
        std::free(s->messages);
    }
    if (s->enums) {
        for (uint32_t e = 0; e < s->nenums; e++) {
            std::free(s->enums[e].values);
            std::free(s->enums[e].declared);
        }
        std::free(s->enums);
    }
    std::free(s->names);
    std::free(s->arena);
    std::free(s);
}
